"""lockpick client for OpenStack tooz's Redis lock (Debian python3-tooz), over the client protocol.

One node (--lock py-tooz). The coordinator runs tooz's own heart: a thread that renews every held
lock (redis-py's Lock.reacquire) every half of min(lock_timeout, membership_timeout). tooz promises
no validity: a lock is held until released, and a failed renewal is only logged, never told to the
holder. So init_ok offers watchdog without validity, and each renewal tooz made is a renewed event.
tooz counts its timeouts in whole seconds: the lock lives ceil(TTL) seconds without a renewal.
"""
import json
import math
import sys
import threading
import uuid

import tooz
from tooz import coordination

out = threading.Lock()


def send(msg):
    with out:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def failure(e):
    """Error code of a tooz exception: only a failed connect certainly sent nothing."""
    if "connecting to" in str(e):
        return "unavailable"
    return "timeout" if isinstance(e, coordination.ToozConnectionError) else "crashed"


def watch(lock, key, value):
    """Report every renewal tooz's heart makes of lock, as a renewed event."""
    beat = lock.heartbeat

    def heartbeat():
        renewed = beat()
        if renewed:
            send({"type": "renewed", "key": key, "value": value})
        return renewed
    lock.heartbeat = heartbeat


def main():
    coord, held, ttl = None, {}, 2.0
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                ttl = m["ttl_ms"] / 1000
                secs = max(1, math.ceil(ttl))
                url = "redis://%s?timeout=1&lock_timeout=%d&membership_timeout=%d" % (
                    m["nodes"][0]["addr"], secs, secs)
                coord = coordination.get_coordinator(url, ("p%d-%s" % (m["process"], uuid.uuid4())).encode())
                coord.start(start_heart=True)
                send({"type": "init_ok", "in_reply_to": mid, "library": "tooz redis lock",
                      "version": getattr(tooz, "__version__", "3.1.0"),
                      "capabilities": {"validity": False, "token": False, "extend": False,
                                       "watchdog": True, "reentrant": False}})
            elif t == "acquire":
                lock = coord.get_lock(m["key"].encode())
                if lock.acquire(blocking=m["ttl_ms"] / 2000):
                    value = lock._lock.local.token.decode()  # the value tooz stored, to name the lease
                    held[(m["key"], value)] = lock
                    watch(lock, m["key"], value)
                    send({"type": "acquire_ok", "in_reply_to": mid, "value": value})
                else:
                    send({"type": "error", "in_reply_to": mid, "code": "held"})
            elif t == "release":
                if held.pop((m["key"], m["value"])).release():
                    send({"type": "release_ok", "in_reply_to": mid})
                else:
                    send({"type": "error", "in_reply_to": mid, "code": "lost"})
            else:
                send({"type": "error", "in_reply_to": mid, "code": "bad_request", "text": t})
        except Exception as e:  # noqa: BLE001 -- every failure leaves the outcome unknown
            print("request %d: %r" % (mid, e), file=sys.stderr, flush=True)
            send({"type": "error", "in_reply_to": mid, "code": failure(e), "text": str(e)})


if __name__ == "__main__":
    main()
