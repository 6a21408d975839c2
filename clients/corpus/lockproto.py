"""Shared plumbing of the corpus clients: the client protocol's JSON lines, redis connections and
error codes (docs/protocol.md). No lock logic lives here: each client's defect is in its own file.
"""
import json
import sys
import threading

import redis
from redis.exceptions import ConnectionError, TimeoutError

_out = threading.Lock()

# Lua scripts shared by the clients that use them correctly.
DEL_IF_MINE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
PEXPIRE_IF_MINE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                   "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end")


class Refused(Exception):
    """A definite answer: code is held, not_acquired or lost."""

    def __init__(self, code, text=""):
        super().__init__(text or code)
        self.code = code


def send(msg):
    line = json.dumps(msg) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def failure(e):
    """Error code of a redis-py exception: only a failed connect certainly sent nothing."""
    if isinstance(e, ConnectionError) and "connecting to" in str(e):
        return "unavailable"
    if isinstance(e, (ConnectionError, TimeoutError)):
        return "timeout"
    return "crashed"


def connect(addr, timeout_s):
    """A lazily connecting client of one node, no retries: a retried write has an unknown outcome."""
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=timeout_s,
                       socket_connect_timeout=timeout_s, retry_on_timeout=False)


def node_timeout(init):
    return float(init["options"].get("node_timeout_ms", "500")) / 1000


def drift_ms(ttl_ms):
    """Redlock's clock-drift allowance: 1% of the TTL plus 2 ms."""
    return int(ttl_ms * 0.01) + 2


def serve(lock):
    """Runs the protocol loop over lock, an object with init(msg) -> (library, capabilities) and
    acquire/release/extend(msg) -> reply fields (a dict); Refused and redis errors become error
    replies."""
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                library, caps = lock.init(m)
                full = {c: bool(caps.get(c)) for c in ("validity", "token", "extend", "watchdog", "reentrant")}
                send({"type": "init_ok", "in_reply_to": mid, "library": library,
                      "version": redis.__version__, "capabilities": full})
                continue
            fields = getattr(lock, t)(m) or {}
            reply = {"type": t + "_ok", "in_reply_to": mid}
            reply.update(fields)
            send(reply)
        except Refused as e:
            send({"type": "error", "in_reply_to": mid, "code": e.code, "text": str(e)})
        except Exception as e:  # noqa: BLE001 -- every other failure leaves the outcome unknown
            log("request %d (%s): %r" % (mid, t, e))
            send({"type": "error", "in_reply_to": mid, "code": failure(e), "text": str(e)})
