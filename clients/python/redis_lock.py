"""lockpick client for redis-py's redis.lock.Lock (Debian python3-redis), over the client protocol.

One node (--lock py-redis runs it on redis-masters with one node). The Lock promises no validity of
its own: it sets the key with PX ttl and trusts it, so lockpick counts each lease as the TTL from
the request. Blocking acquires wait at most half the TTL, polling every 50 ms.
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


def main():
    client, ttl, held = None, 2.0, {}
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                node = m["nodes"][0]["addr"].rsplit(":", 1)
                timeout = float((m.get("options") or {}).get("node_timeout_ms", "500")) / 1000
                client = redis.Redis(host=node[0], port=int(node[1]), socket_timeout=timeout,
                                     socket_connect_timeout=timeout, retry_on_timeout=False)
                send({"type": "init_ok", "in_reply_to": mid, "library": "redis-py redis.lock.Lock",
                      "version": redis.__version__,
                      "capabilities": {"validity": False, "token": False, "extend": True,
                                       "watchdog": False, "reentrant": False}})
            elif t == "acquire":
                ttl = m["ttl_ms"] / 1000
                lock = client.lock(m["key"], timeout=ttl, sleep=0.05, blocking_timeout=ttl / 2,
                                   thread_local=False)
                if lock.acquire():
                    token = lock.local.token.decode()
                    held[(m["key"], token)] = lock
                    send({"type": "acquire_ok", "in_reply_to": mid, "value": token})
                else:
                    send({"type": "error", "in_reply_to": mid, "code": "held"})
            elif t == "release":
                lock = held.pop((m["key"], m["value"]))
                lock.release()
                send({"type": "release_ok", "in_reply_to": mid})
            elif t == "extend":
                held[(m["key"], m["value"])].extend(m["ttl_ms"] / 1000, replace_ttl=True)
                send({"type": "extend_ok", "in_reply_to": mid})
        except LockNotOwnedError as e:
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": str(e)})
        except LockError as e:
            send({"type": "error", "in_reply_to": mid, "code": "crashed", "text": str(e)})
        except Exception as e:  # noqa: BLE001 -- every other failure leaves the outcome unknown
            print("request %d: %r" % (mid, e), file=sys.stderr, flush=True)
            send({"type": "error", "in_reply_to": mid, "code": failure(e), "text": str(e)})


if __name__ == "__main__":
    main()
