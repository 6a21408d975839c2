#!/usr/bin/python3
"""BROKEN (drift allowance added instead of subtracted): the promised validity is
ttl - (elapsed - drift) instead of ttl - elapsed - drift, so it is longer than the key's TTL.

Why a developer writes it: the Redlock formula is copied with one pair of parentheses too many
("subtract the elapsed time, net of drift"); every test passes, since the promise is only ~2% of
the TTL too long.
Interleaving: A works to the end of its promise; the key expires ~15 ms (drift allowance minus the
acquire's time) before that, and a waiter retrying within that window acquires while A still holds.
Needs waiters that retry within a few ms (--think-max 5ms) and holds that reach the deadline (the
default hold distribution). Declares validity; one node.
"""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, drift_ms, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        return "corpus validity_plus_drift", {"validity": True}

    def acquire(self, m):
        t0, ttl = time.monotonic(), m["ttl_ms"]
        value = uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=ttl):
            raise Refused("held")
        elapsed = (time.monotonic() - t0) * 1000
        validity = ttl - (elapsed - drift_ms(ttl))  # the defect: should be ttl - elapsed - drift
        # counted from the request's arrival, as the protocol counts it: add back the elapsed time
        return {"value": value, "validity_ms": int(validity + elapsed)}

    def release(self, m):
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
