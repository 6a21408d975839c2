"""A client program that dies by itself, for the tests of client deaths (docs/protocol.md).

A real lock (redis-py's Lock on the first node), and a way to die:

  crashclient.py MODE [N] [ARGS...]

  crash-after N    an uncaught exception (a traceback on stderr) at the acquire after N acquires
  segv-after N     a segmentation fault at the acquire after N acquires
  exit-holding N   os._exit(3) right after its N-th grant, while the harness holds the lease
  crash-first      an exception at its first acquire: every process it starts dies at once
  no-init-ok       an exception on init: it never answers init_ok
  library NAME VERSION   no death: init_ok names library NAME at VERSION; VERSION may contain
                   {p}, replaced by the process id
"""
import ctypes
import json
import os
import sys

import redis

mode = sys.argv[1]
arg = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0


def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()


client, held, acquires = None, {}, 0
for line in sys.stdin:
    m = json.loads(line)
    t, mid = m["type"], m["id"]
    if t == "init":
        if mode == "no-init-ok":
            raise RuntimeError("cannot initialise: no such library")
        host, port = m["nodes"][0]["addr"].rsplit(":", 1)
        client = redis.Redis(host=host, port=int(port), socket_timeout=0.5, socket_connect_timeout=0.5)
        library, version = "crashclient", "1.0"
        if mode == "library":
            library, version = sys.argv[2], sys.argv[3].replace("{p}", str(m["process"]))
        send({"type": "init_ok", "in_reply_to": mid, "library": library, "version": version,
              "capabilities": {"validity": False, "token": False, "extend": False, "watchdog": False, "reentrant": False}})
    elif t == "acquire":
        if mode == "crash-first" or (mode == "crash-after" and acquires >= arg):
            raise ZeroDivisionError("the library divided by zero after %d acquires" % acquires)
        if mode == "segv-after" and acquires >= arg:
            print("about to crash hard", file=sys.stderr, flush=True)
            ctypes.string_at(0)
        acquires += 1
        lock = client.lock(m["key"], timeout=m["ttl_ms"] / 1000, blocking=False, thread_local=False)
        if lock.acquire():
            token = lock.local.token.decode()
            held[(m["key"], token)] = lock
            send({"type": "acquire_ok", "in_reply_to": mid, "value": token})
            if mode == "exit-holding" and acquires >= arg:
                print("exiting while holding %s" % m["key"], file=sys.stderr, flush=True)
                os._exit(3)
        else:
            send({"type": "error", "in_reply_to": mid, "code": "held"})
    elif t == "release":
        lock = held.pop((m["key"], m["value"]), None)
        try:
            if lock is None:
                raise redis.exceptions.LockNotOwnedError("not held")
            lock.release()
            send({"type": "release_ok", "in_reply_to": mid})
        except redis.exceptions.LockError as e:
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": str(e)})
