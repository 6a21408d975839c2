#!/usr/bin/python3
"""BROKEN (watchdog renews by re-setting the key unconditionally): the renewal thread refreshes the
lease with a plain SET key value PX ttl, so a renewal after the lease was lost takes the key back
from its new holder, and reports it as renewed.

Why a developer writes it: "renewal = write the lease again" is the simplest refresh, it cannot
fail on a missing key (which looked like a feature: it "repairs" a key evicted early), and the
acquire itself is a correct SET NX.
Interleaving: A's program stops (GC pause, SIGSTOP) past its validity; its key expires and B
acquires; A resumes, its watchdog SETs the key to A's value (B's lease is gone from the server,
though B holds on by its validity and renewals) and A's release then deletes it; C acquires while B
still holds. Declares watchdog and validity (each renewal's validity is sent with `renewed`);
one node; exposed by client-pause.
"""
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockproto import DEL_IF_MINE, Refused, connect, drift_ms, log, node_timeout, send, serve  # noqa: E402


class Lock:
    def init(self, m):
        self.addr, self.timeout = m["nodes"][0]["addr"], node_timeout(m)
        self.r = connect(self.addr, self.timeout)
        self.dogs = {}  # (key, value) -> threading.Event that stops its watchdog
        return "corpus watchdog_blind", {"watchdog": True, "validity": True}

    def watchdog(self, key, value, ttl, stop):
        r = connect(self.addr, self.timeout)  # its own connection, as a renewal thread has
        while not stop.wait(ttl / 3000):
            t0 = time.monotonic()
            try:
                r.set(key, value, px=ttl)  # the defect: no NX/XX, no owner check
            except Exception as e:  # noqa: BLE001
                log("renewal of %s failed: %r" % (key, e))
                continue
            if stop.is_set():
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
        stop = self.dogs.pop((m["key"], m["value"]), None)
        if stop:
            stop.set()
        if not self.r.eval(DEL_IF_MINE, 1, m["key"], m["value"]):
            raise Refused("lost")


if __name__ == "__main__":
    serve(Lock())
