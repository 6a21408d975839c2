#!/usr/bin/python3
"""BROKEN (extend believed to add time): extend runs an owner-checked Lua PEXPIRE key ttl, which
sets the key's remaining time to ttl, but promises the time the key had left (its PTTL, read in
the same script) plus ttl.

Why a developer writes it: "extend the lease by ttl" reads as adding, as in `lease.extend(30)`
APIs that add; PEXPIRE's "set the timeout" semantics are easy to misremember, and the renewal
itself is the textbook atomic Lua check.
Interleaving: A renews with a third of its validity left: the key now lives ttl from the renewal,
but A is promised ttl + the ~0.5 TTL the key had left; the key expires, B acquires, and A works on into B's lease
until the promise it was given ends. Declares validity and extend; one node; exposed by --extend.
"""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, drift_ms, node_timeout, serve  # noqa: E402


# Owner-checked renewal that returns the key's remaining time before it (-3: not this lease's).
RENEW = ("if redis.call('get', KEYS[1]) == ARGV[1] then local left = redis.call('pttl', KEYS[1]); "
         "redis.call('pexpire', KEYS[1], ARGV[2]); return left else return -3 end")


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        self.deadline = {}
        return "corpus extend_adds", {"validity": True, "extend": True}

    def acquire(self, m):
        t0, ttl, value = time.monotonic(), m["ttl_ms"], uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=ttl):
            raise Refused("held")
        validity = ttl - drift_ms(ttl)
        if time.monotonic() >= t0 + validity / 1000:
            raise Refused("not_acquired", "validity used up before the reply")
        self.deadline[(m["key"], value)] = t0 + validity / 1000
        return {"value": value, "validity_ms": validity}

    def release(self, m):
        self.deadline.pop((m["key"], m["value"]), None)
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")

    def extend(self, m):
        t0, ttl, lease = time.monotonic(), m["ttl_ms"], (m["key"], m["value"])
        old = self.deadline.get(lease)
        margin = (drift_ms(ttl) + 20) / 1000
        if old is None or t0 >= old - margin:
            raise Refused("lost", "the lease's validity has ended")
        left = self.r.eval(RENEW, 1, m["key"], m["value"], ttl)
        if left < 0:
            raise Refused("lost")
        if time.monotonic() >= old - margin:
            raise Refused("lost", "renewal confirmed after the lease's deadline")
        validity = left + ttl - drift_ms(ttl)  # the defect: PEXPIRE sets the TTL, it does not add
        self.deadline[lease] = t0 + validity / 1000
        return {"validity_ms": validity}


if __name__ == "__main__":
    serve(Lock())
