"""A deliberately broken lock client for `lockpick card --client-cmd` (docs/card.md): it sends the
lease in whole seconds (SET NX EX int(ttl)), so a TTL of 1.5 s lives 1 s while the harness counts
1.5 s, and it releases by plain DEL, whoever holds the key. Run it with:

    lockpick card --client-cmd "/usr/bin/python3 cmd/lockpick/testdata/broken_lock.py"
"""
import json
import os
import sys

import redis


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main():
    client = None
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                host, port = m["nodes"][0]["addr"].rsplit(":", 1)
                timeout = float(m["options"].get("node_timeout_ms", "500")) / 1000
                client = redis.Redis(host=host, port=int(port), socket_timeout=timeout, socket_connect_timeout=timeout)
                send({"type": "init_ok", "in_reply_to": mid, "library": "broken_lock.py", "version": "0",
                      "capabilities": {"validity": False, "token": False, "extend": False, "watchdog": False, "reentrant": False}})
            elif t == "acquire":
                value = os.urandom(8).hex()
                if client.set(m["key"], value, nx=True, ex=int(m["ttl_ms"] / 1000)):
                    send({"type": "acquire_ok", "in_reply_to": mid, "value": value})
                else:
                    send({"type": "error", "in_reply_to": mid, "code": "held"})
            elif t == "release":
                client.delete(m["key"])
                send({"type": "release_ok", "in_reply_to": mid})
        except Exception as e:  # noqa: BLE001 -- the outcome of a failed request is unknown
            send({"type": "error", "in_reply_to": mid, "code": "timeout", "text": str(e)})


if __name__ == "__main__":
    main()
