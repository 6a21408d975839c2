#!/usr/bin/python3
"""BROKEN (Redlock quorum counted over the nodes that answered): the majority is taken of the
replies that came back, not of all N nodes, so a client that reaches only a minority of the nodes
can still "win" it.

Why a developer writes it: `quorum = len(replies) // 2 + 1` after filtering out the errors, so that
"a dead node does not count against us"; with every node up it is the textbook N/2+1.
Interleaving: client group c1 is cut from a majority of 5 nodes (3), reaches n4 and n5 and takes
both: 2 of 2 replies is a majority of the replies; group c2 reaches all five, gets n1..n3 (3 of 5)
and holds too. Exposed by partition:kind=client-majority with two client groups. Everything else is
correct Redlock (validity TTL - drift from the request, cleanup of failed rounds, Lua release).
Declares validity; 5 nodes.
"""
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, drift_ms, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        t = node_timeout(m)
        self.nodes = [connect(n["addr"], t) for n in m["nodes"]]
        self.pool = ThreadPoolExecutor(len(self.nodes))
        return "corpus redlock_reachable_quorum", {"validity": True}

    def each(self, f):
        def safe(r):
            try:
                return f(r)
            except Exception as e:  # noqa: BLE001
                return e
        return list(self.pool.map(safe, self.nodes))

    def acquire(self, m):
        t0, ttl, key, value = time.monotonic(), m["ttl_ms"], m["key"], uuid.uuid4().hex
        res = self.each(lambda r: r.set(key, value, nx=True, px=ttl))
        replies = [x for x in res if not isinstance(x, Exception)]
        got = sum(1 for x in replies if x is True)
        quorum = len(replies) // 2 + 1  # the defect: should be len(self.nodes) // 2 + 1
        validity = ttl - drift_ms(ttl)
        if replies and got >= quorum and time.monotonic() < t0 + validity / 1000:
            return {"value": value, "validity_ms": validity}
        self.each(lambda r: r.eval(DEL_IF_MINE, 1, key, value))
        if not replies:
            raise res[0]
        raise Refused("held" if got == 0 else "not_acquired", "%d of %d replies" % (got, len(replies)))

    def release(self, m):
        key, value = m["key"], m["value"]
        res = self.each(lambda r: r.eval(DEL_IF_MINE, 1, key, value))
        if any(x == 1 for x in res):
            return
        errors = [x for x in res if isinstance(x, Exception)]
        if errors:
            raise errors[0]
        raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
