#!/usr/bin/python3
"""BROKEN (check-then-act extend): extend reads the key, compares it with the lease's value, then
sends PEXPIRE in a second round trip; between the two the key can expire and pass to another
client, whose lease the PEXPIRE then renews and reports as this one's.

Why a developer writes it: the owner check is there (unlike a plain PEXPIRE), and the local
deadline is checked before sending; the non-atomic read-then-write looks harmless for a renewal.
Interleaving: A extends near its deadline over a slow link; the GET sees A's value, the key expires
before the PEXPIRE arrives, B acquires, the PEXPIRE renews B's key, and A reports extend_ok after
its deadline (a late extend) while B holds too. Declares extend; one node; exposed by --extend with
a slow client group. Nearest self-test mutant: single-extend-unchecked (a plain PEXPIRE, no check
at all); this one checks owner and deadline, but apart from the write and before the reply.
"""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        self.deadline = {}
        return "corpus extend_get_pexpire", {"extend": True}

    def acquire(self, m):
        t0, value = time.monotonic(), uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=m["ttl_ms"]):
            raise Refused("held")
        self.deadline[(m["key"], value)] = t0 + m["ttl_ms"] / 1000
        return {"value": value}

    def release(self, m):
        self.deadline.pop((m["key"], m["value"]), None)
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")

    def extend(self, m):
        t0, lease = time.monotonic(), (m["key"], m["value"])
        if t0 >= self.deadline.get(lease, 0):
            raise Refused("lost", "the lease has expired")
        if self.r.get(m["key"]) != m["value"].encode():
            raise Refused("lost", "the key is no longer this lease's")
        if not self.r.pexpire(m["key"], m["ttl_ms"]):  # the defect: a second round trip
            raise Refused("lost", "the key expired")
        self.deadline[lease] = t0 + m["ttl_ms"] / 1000
        return {}


if __name__ == "__main__":
    serve(Lock())
