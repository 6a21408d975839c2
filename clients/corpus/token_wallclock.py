#!/usr/bin/python3
"""BROKEN (fencing token from the client's wall clock): the token handed to the protected resource
is the client's time in milliseconds, not a counter kept by the lock service.

Why a developer writes it: "timestamps only go up", and a token that needs no extra INCR round trip
and no shared counter looks free.
Interleaving: a client whose clock runs ahead (NTP step, VM resume) acquires and hands out a token
from the future; the next holder, on a correct clock, gets a smaller token, and a resource that
checks tokens would refuse the rightful holder (or, clock behind, accept a stale one). Also equal
tokens for two grants in the same millisecond. The lock itself (SET NX PX, Lua release) is correct.
Declares token; one node; exposed by the client-clock nemesis.
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
        return "corpus token_wallclock", {"token": True}

    def acquire(self, m):
        value = uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=m["ttl_ms"]):
            raise Refused("held")
        return {"value": value, "token": int(time.time() * 1000)}  # the defect

    def release(self, m):
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
