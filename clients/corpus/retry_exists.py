#!/usr/bin/python3
"""BROKEN (a retried acquire takes an existing key for its own): when SET NX times out, the client
retries, and when the retry finds the key taken it assumes its own first attempt set it.

Why a developer writes it: it knows a timed-out write may have landed ("when in doubt") and wants
to avoid locking itself out for a whole TTL; "the key exists, so my first SET got through" is the
shortcut, instead of comparing the key's value with its own.
Interleaving: A's SET NX is delayed past its timeout (a latency spike), B acquires the free key,
A retries, gets nil (key exists) and reports acquire_ok while B holds. Exposed by a latency spike
on one client group (the self-test's timeouts cell). No capabilities; one node.
"""
import os
import sys
import time
import uuid

from redis.exceptions import TimeoutError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, log, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        return "corpus retry_exists", {}

    def acquire(self, m):
        value, timed_out = uuid.uuid4().hex, False
        for attempt in range(4):
            try:
                ok = self.r.set(m["key"], value, nx=True, px=m["ttl_ms"])
            except TimeoutError as e:
                log("acquire attempt %d timed out: %r; retrying" % (attempt, e))
                timed_out = True
                time.sleep(0.1)
                continue
            if ok:
                return {"value": value}
            if timed_out:  # the defect: the key exists, so "our" earlier SET must have landed
                return {"value": value}
            raise Refused("held")
        raise TimeoutError("SET NX timed out 4 times")

    def release(self, m):
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
