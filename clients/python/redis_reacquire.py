"""lockpick client for redis-py's Lock(timeout=0) renewed with reacquire(), over the client protocol.

The catalogue's row for redis-py#4279 (docs/bugs.md). timeout=0 is redis-py's "hold until
release()": acquire sets the key with no expiry, so the client declares a watchdog lock (no
deadline; a hold lasts until its release). The holder then renews with reacquire(), as the
active/passive pattern reacquire() was added for does. In redis-py up to at least 8.1 (Debian's
4.3.4 here) reacquire() sends PEXPIRE key 0, which deletes the key, and reports success: another
client takes the lock while this one still holds it.
"""
import json
import sys

import redis
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError, TimeoutError


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def failure(e):
    """Error code of a redis-py exception: only a failed connect certainly sent nothing."""
    if isinstance(e, ConnectionError) and "connecting to" in str(e):
        return "unavailable"
    if isinstance(e, (ConnectionError, TimeoutError)):
        return "timeout"
    return "crashed"


def init(m):
    node = m["nodes"][0]["addr"].rsplit(":", 1)
    timeout = float((m.get("options") or {}).get("node_timeout_ms", "500")) / 1000
    client = redis.Redis(host=node[0], port=int(node[1]), socket_timeout=timeout,
                         socket_connect_timeout=timeout, retry_on_timeout=False)
    send({"type": "init_ok", "in_reply_to": m["id"],
          "library": "redis-py redis.lock.Lock(timeout=0) + reacquire()",
          "version": redis.__version__,
          "capabilities": {"validity": False, "token": False, "extend": False,
                           "watchdog": True, "reentrant": False}})
    return client


def acquire(client, held, m):
    """Takes the lock with no expiry, then renews it with reacquire() before the work begins."""
    wait = m["ttl_ms"] / 2000
    lock = client.lock(m["key"], timeout=0, sleep=0.05, blocking_timeout=wait, thread_local=False)
    if not lock.acquire():
        send({"type": "error", "in_reply_to": m["id"], "code": "held"})
        return
    token = lock.local.token.decode()
    held[(m["key"], token)] = lock
    lock.reacquire()
    send({"type": "acquire_ok", "in_reply_to": m["id"], "value": token})


def main():
    client, held = None, {}
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                client = init(m)
            elif t == "acquire":
                acquire(client, held, m)
            elif t == "release":
                held.pop((m["key"], m["value"])).release()
                send({"type": "release_ok", "in_reply_to": mid})
        except LockNotOwnedError as e:
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": str(e)})
        except LockError as e:
            send({"type": "error", "in_reply_to": mid, "code": "crashed", "text": str(e)})
        except Exception as e:  # noqa: BLE001 -- every other failure leaves the outcome unknown
            print("request %d: %r" % (mid, e), file=sys.stderr, flush=True)
            send({"type": "error", "in_reply_to": mid, "code": failure(e), "text": str(e)})


if __name__ == "__main__":
    main()
