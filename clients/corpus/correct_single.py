#!/usr/bin/python3
"""CORRECT: single-node lock, SET NX PX, Lua check-and-delete release, owner-checked Lua extend.

Design: the value is a fresh random id per lease; the promise is counted from the moment the
request arrived (monotonic clock) as TTL minus Redlock's drift allowance (1% + 2 ms), and a reply
that comes after that promise ran out is not a grant. extend is refused without being sent when the
lease's own deadline is (nearly) past, and refused as lost when its confirmation comes after it:
a renewal must never revive a lease already given up. Declares validity and extend.
Expected: valid in every shape that does not lose keys (no restart without persistence).
"""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, PEXPIRE_IF_MINE, Refused, connect, drift_ms, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        self.deadline = {}  # (key, value) -> monotonic deadline of the promise
        return "corpus correct_single", {"validity": True, "extend": True}

    def margin(self, ttl_ms):
        # How close to its deadline a renewal is no longer sent or accepted: the drift allowance
        # plus the pipe's delay between lockpick and this program (the promise counts from lockpick's send).
        return (drift_ms(ttl_ms) + 20) / 1000

    def acquire(self, m):
        t0, ttl = time.monotonic(), m["ttl_ms"]
        value = uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=ttl):
            raise Refused("held")
        validity = ttl - drift_ms(ttl)
        if time.monotonic() >= t0 + validity / 1000:
            self.r.eval(DEL_IF_MINE, 1, m["key"], value)
            raise Refused("not_acquired", "validity used up before the reply")
        self.deadline[(m["key"], value)] = t0 + validity / 1000
        return {"value": value, "validity_ms": validity}

    def release(self, m):
        self.deadline.pop((m["key"], m["value"]), None)
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost", "the key is no longer this lease's")

    def extend(self, m):
        t0, ttl, lease = time.monotonic(), m["ttl_ms"], (m["key"], m["value"])
        old = self.deadline.get(lease)
        if old is None or t0 >= old - self.margin(ttl):
            raise Refused("lost", "the lease's validity has ended")
        if not self.r.eval(PEXPIRE_IF_MINE, 1, m["key"], m["value"], ttl):
            raise Refused("lost", "the key is no longer this lease's")
        validity = ttl - drift_ms(ttl)
        if time.monotonic() >= old - self.margin(ttl):
            raise Refused("lost", "renewal confirmed after the lease's deadline")
        self.deadline[lease] = t0 + validity / 1000
        return {"validity_ms": validity}


if __name__ == "__main__":
    serve(Lock())
