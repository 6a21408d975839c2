#!/usr/bin/python3
"""BROKEN, liveness (a release that fails is reported ok and leaves the watchdog running): unlock
swallows the release's network error, and the watchdog is only stopped after a DEL that got a
reply, so it keeps renewing a lock nobody holds, for as long as the program lives.

Why a developer writes it: unlock() runs in `finally` blocks and "must never throw", so its errors
are logged and dropped; stopping the renewal timer was put after the DEL "so the lock is not lost
while the DEL is in flight".
Interleaving: A's release is sent while its link drops packets (a short partition, shorter than the
TTL); it times out and is reported ok; after the heal A's watchdog renews the key every TTL/3 with
a correct owner check, forever: every later acquire of the key is refused as held while nobody
holds it (a deadlock after the last heal). Otherwise correct: the watchdog tells its holder `lost`
when a renewal finds the key gone or none succeeded within the TTL less the drift allowance.
Declares watchdog; one node; exposed by partition:kind=isolate:mode=drop with cuts shorter than the TTL.
"""
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, PEXPIRE_IF_MINE, Refused, connect, drift_ms, log, node_timeout, send, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.addr, self.timeout = m["nodes"][0]["addr"], node_timeout(m)
        self.r = connect(self.addr, self.timeout)
        self.dogs = {}
        return "corpus zombie_watchdog", {"watchdog": True, "validity": True}

    def watchdog(self, key, value, ttl, stop):
        r = connect(self.addr, self.timeout)
        pause = ttl / 3000
        while not stop.wait(pause):
            t0, pause = time.monotonic(), ttl / 3000
            try:
                renewed = r.eval(PEXPIRE_IF_MINE, 1, key, value, ttl)
            except Exception as e:  # noqa: BLE001
                log("renewal of %s failed: %r; retrying" % (key, e))
                pause = 0.02  # retry soon: the lease is running out
                continue
            if stop.is_set():
                return
            if not renewed:
                send({"type": "lost", "key": key, "value": value})
                return
            left = ttl - drift_ms(ttl) - (time.monotonic() - t0) * 1000
            if left > 0:
                send({"type": "renewed", "key": key, "value": value, "validity_ms": int(left)})

    def acquire(self, m):
        t0, ttl, value = time.monotonic(), m["ttl_ms"], uuid.uuid4().hex
        if not self.r.set(m["key"], value, nx=True, px=ttl):
            raise Refused("held")
        validity = ttl - drift_ms(ttl)
        if time.monotonic() >= t0 + validity / 1000:
            raise Refused("not_acquired", "validity used up before the reply")
        stop = threading.Event()
        self.dogs[(m["key"], value)] = stop
        threading.Thread(target=self.watchdog, args=(m["key"], value, ttl, stop), daemon=True).start()
        return {"value": value, "validity_ms": validity}

    def release(self, m):
        lease = (m["key"], m["value"])
        try:
            deleted = self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"])
        except Exception as e:  # noqa: BLE001 -- the defect: unlock never throws
            log("release of %s failed, ignored: %r" % (m["key"], e))
            return
        self.dogs.pop(lease).set()  # stopped only once the DEL answered
        if not deleted:
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
