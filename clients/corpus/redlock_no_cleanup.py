#!/usr/bin/python3
"""BROKEN, liveness (a failed Redlock round leaves its keys behind): when a round wins fewer than
N/2+1 nodes, the client returns "not acquired" without deleting the keys it did set, so they block
those nodes for a whole TTL; rounds that split the nodes keep failing each other (a livelock).

Why a developer writes it: "they expire anyway", and the cleanup is a second round trip on a path
that already failed; some Redlock ports skip it, or only clean up when the round timed out.
Interleaving: two clients race for a free key over 5 nodes and split them 3/2, or a slow node
answers after the race; every loser's partial keys stay for a TTL, and with several waiters the
nodes stay split between stale partial keys: the key is refused to everyone while nobody holds it.
Safety is intact (the quorum is right). Declares validity; 5 nodes; exposed, if lockpick judged
livelocks, by a run with contention and a slow minority (slow-group on Redlock).
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
        self.quorum = len(self.nodes) // 2 + 1
        self.pool = ThreadPoolExecutor(len(self.nodes))
        return "corpus redlock_no_cleanup", {"validity": True}

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
        got = sum(1 for x in res if x is True)
        validity = ttl - drift_ms(ttl)
        if got >= self.quorum and time.monotonic() < t0 + validity / 1000:
            return {"value": value, "validity_ms": validity}
        # the defect: no cleanup of the nodes this round did win
        raise Refused("held" if got == 0 else "not_acquired", "%d of %d nodes" % (got, len(res)))

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
