#!/usr/bin/python3
"""BROKEN (re-entry from a local cache): a re-entrant lock that answers a re-entry from its own
record of what it holds, without asking the server whether the lease still exists.

Why a developer writes it: re-entry is "the same thread already holds it", so a local counter looks
enough and saves a round trip (hand-rolled ReentrantLock wrappers over SET NX do this).
Interleaving: A acquires (depth 1) and works past its TTL; the key expires and B acquires; A enters
again (depth 2) from its cache and is told it holds the lock while B does. Declares reentrant; one
node; exposed by --reentrant with holds past the TTL (--hold-max 2*TTL).
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        self.held = {}  # key -> [value, depth]
        return "corpus reentrant_local", {"reentrant": True}

    def acquire(self, m):
        mine = self.held.get(m["key"])
        if mine is not None:  # the defect: the server is not asked, the TTL not checked
            mine[1] += 1
            return {"value": mine[0], "depth": mine[1]}
        value = uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=m["ttl_ms"]):
            raise Refused("held")
        self.held[m["key"]] = [value, 1]
        return {"value": value, "depth": 1}

    def release(self, m):
        mine = self.held.get(m["key"])
        if mine is None or mine[0] != m["value"]:
            raise Refused("lost", "not held by this client")
        if mine[1] > 1:
            mine[1] -= 1
            return
        del self.held[m["key"]]
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
