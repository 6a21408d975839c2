#!/usr/bin/python3
"""BROKEN (lease value shared by every process): the lease value is the host's name, so the
value-checked release cannot tell this process's lease from another's.

Why a developer writes it: the owner id is "who holds the lock" for the operators' dashboards, and
the host name reads well there (cron-lock scripts do this: one job per host was assumed). The
release is otherwise the textbook Lua check-and-delete.
Interleaving: A holds past its TTL (a slow critical section), the key expires, B acquires (same
value), A's release runs the Lua check, finds "its" value and deletes B's key; C acquires while B
still holds. Two live leases share a value too. Exposed by a plain run (a tenth of the holds
overrun). No capabilities; one node.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, node_timeout, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.r = connect(m["nodes"][0]["addr"], node_timeout(m))
        self.owner = socket.gethostname()  # the defect: not unique per lease
        return "corpus shared_value", {}

    def acquire(self, m):
        if not self.r.set(m["key"], self.owner, nx=True, px=m["ttl_ms"]):
            raise Refused("held")
        return {"value": self.owner}

    def release(self, m):
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
