#!/usr/bin/python3
"""CORRECT: Redlock over every node given at init (run with --nodes 3 or 5).

Design: SET NX PX of a fresh random value on every node at once, each with the node timeout; a
grant needs a majority of all nodes (N/2+1, nodes that did not answer count against); the promise
is TTL minus the drift allowance (1% + 2 ms), counted from the moment the request arrived, and a
round whose majority came after that is no grant. A failed round deletes its own value (Lua
check-and-delete) everywhere. Release: Lua check-and-delete on every node. Extend: owner-checked
Lua PEXPIRE on every node, a majority needed, refused without being sent near the deadline and
refused when confirmed after it. Declares validity and extend.
"""
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, PEXPIRE_IF_MINE, Refused, connect, drift_ms, log, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        t = node_timeout(m)
        self.nodes = [connect(n["addr"], t) for n in m["nodes"]]
        self.quorum = len(self.nodes) // 2 + 1
        self.pool = ThreadPoolExecutor(len(self.nodes))
        self.deadline = {}
        return "corpus correct_redlock", {"validity": True, "extend": True}

    def each(self, f):
        """f(node) on every node at once: a list of results, an exception for a node that failed."""
        def safe(r):
            try:
                return f(r)
            except Exception as e:  # noqa: BLE001
                return e
        return list(self.pool.map(safe, self.nodes))

    def margin(self, ttl_ms):
        return (drift_ms(ttl_ms) + 20) / 1000

    def acquire(self, m):
        t0, ttl, key, value = time.monotonic(), m["ttl_ms"], m["key"], uuid.uuid4().hex
        res = self.each(lambda r: r.set(key, value, nx=True, px=ttl))
        got = sum(1 for x in res if x is True)
        validity = ttl - drift_ms(ttl)
        if got >= self.quorum and time.monotonic() < t0 + validity / 1000:
            self.deadline[(key, value)] = t0 + validity / 1000
            return {"value": value, "validity_ms": validity}
        self.each(lambda r: r.eval(DEL_IF_MINE, 1, key, value))
        errors = [x for x in res if isinstance(x, Exception)]
        if errors:
            log("acquire of %s: %d of %d nodes, errors: %r" % (key, got, len(res), errors))
        if got == 0 and not errors:
            raise Refused("held")
        raise Refused("not_acquired", "%d of %d nodes granted, %d needed" % (got, len(res), self.quorum))

    def release(self, m):
        key, value = m["key"], m["value"]
        self.deadline.pop((key, value), None)
        res = self.each(lambda r: r.eval(DEL_IF_MINE, 1, key, value))
        if any(x == 1 for x in res):
            return
        errors = [x for x in res if isinstance(x, Exception)]
        if errors:
            raise errors[0]
        raise Refused("lost")

    def extend(self, m):
        t0, ttl, key, value = time.monotonic(), m["ttl_ms"], m["key"], m["value"]
        old = self.deadline.get((key, value))
        if old is None or t0 >= old - self.margin(ttl):
            raise Refused("lost", "the lease's validity has ended")
        res = self.each(lambda r: r.eval(PEXPIRE_IF_MINE, 1, key, value, ttl))
        got = sum(1 for x in res if x == 1)
        if time.monotonic() >= old - self.margin(ttl):
            raise Refused("lost", "renewal confirmed after the lease's deadline")
        if got < self.quorum:
            errors = [x for x in res if isinstance(x, Exception)]
            if errors:
                raise errors[0]
            raise Refused("lost", "%d of %d nodes renewed" % (got, len(res)))
        validity = ttl - drift_ms(ttl)
        self.deadline[(key, value)] = t0 + validity / 1000
        return {"validity_ms": validity}


if __name__ == "__main__":
    serve(Lock())
