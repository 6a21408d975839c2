#!/usr/bin/python3
"""BROKEN (check-then-act acquire): acquire reads the key, and when it is empty sets it with a
plain SET (no NX), in two round trips.

Why a developer writes it: `if not r.get(key): r.set(key, me, px=ttl)` reads like the definition
of a lock, and works in every single-threaded test.
Interleaving: A and B both GET the free key (nil), then both SET it; the second SET overwrites the
first and both report acquire_ok. The window is one round trip; a slow link (slow-group) widens it
to the link's delay. Release and value are otherwise correct. No capabilities; one node.
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        return "corpus check_then_set", {}

    def acquire(self, m):
        if self.r.get(m["key"]) is not None:
            raise Refused("held")
        value = uuid.uuid4().hex
        self.r.set(m["key"], value, px=m["ttl_ms"])  # the defect: no NX, decided by the GET above
        return {"value": value}

    def release(self, m):
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
