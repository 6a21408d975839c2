"""lockpick client for kazoo's ZooKeeper Lock recipe (Debian python3-kazoo), over the client protocol.

Configured as a kazoo user following its documentation would: one KazooClient per program, session
timeout = the TTL, command retries bounded by half the TTL, and a connection listener that treats
SUSPENDED and LOST as the end of every held lock (kazoo's docs: "the lock should be considered
lost" once the connection is suspended). kazoo's Lock promises no deadline: its node lives as long
as the session, and the holder learns of its loss only through that listener. So init_ok offers
watchdog without validity, and each suspension is a lost event about every lease held then. The
fencing token is the lock node's creation zxid (czxid), which never goes back.

kazoo calls the listener on its own thread, so stdout and the table of held leases are guarded.
"""
import json
import sys
import threading
import uuid

import kazoo
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import CancelledError, ConnectionLoss, LockTimeout, NoNodeError, OperationTimeoutError, SessionExpiredError
from kazoo.recipe.lock import Lock

ROOT = "/lockpick-kazoo/"

out = threading.Lock()
state = threading.Lock()  # guards held and suspensions
held = {}  # key -> value (the lock node's path) of the leases held now
suspensions = [0]


def send(msg):
    with out:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def listener(s):
    """The listener a kazoo user writes: a suspended or lost connection ends every lock held."""
    print("connection %s" % s, file=sys.stderr, flush=True)
    if s not in (KazooState.SUSPENDED, KazooState.LOST):
        return
    with state:
        suspensions[0] += 1
        for key, value in held.items():
            send({"type": "lost", "key": key, "value": value})
        held.clear()


def failure(e):
    """Error code of a kazoo exception: every one after a connect leaves the outcome unknown."""
    if isinstance(e, (ConnectionLoss, OperationTimeoutError, SessionExpiredError)):
        return "timeout"
    return "crashed"


class Client:
    def __init__(self, m):
        self.ttl = m["ttl_ms"] / 1000
        hosts = ",".join(n["addr"] for n in m["nodes"])
        retry = {"max_tries": -1, "delay": 0.05, "max_delay": 0.5, "deadline": self.ttl / 2}
        self.zk = KazooClient(hosts=hosts, timeout=self.ttl, command_retry=retry,
                              connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
        self.zk.add_listener(listener)
        self.locks = {}  # key -> Lock
        self.identifier = "p%d-%s" % (m["process"], uuid.uuid4())

    def acquire(self, mid, key):
        if not self.zk.connected:
            try:
                # Started at the first acquire: a process may begin during a partition.
                self.zk.start(timeout=max(0.2, self.ttl / 4))
            except self.zk.handler.timeout_exception:
                send({"type": "error", "in_reply_to": mid, "code": "unavailable", "text": "not connected to any member"})
                return
            print("session timeout negotiated: %d ms" % self.zk._session_timeout, file=sys.stderr, flush=True)
        with state:
            before = suspensions[0]
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = Lock(self.zk, ROOT + key, self.identifier)
        # Wait up to half the TTL for the lock, as the other shipped clients do. kazoo's timeout
        # bounds each wait for a predecessor, not the acquire: a queue that moves restarts it, so
        # the whole wait is bounded by cancelling the acquire, which deletes its node.
        bound = threading.Timer(self.ttl / 2, lock.cancel)
        bound.start()
        try:
            got = lock.acquire(blocking=True, timeout=self.ttl / 2)
        except (LockTimeout, CancelledError):
            got = False
        finally:
            bound.cancel()
            lock.cancelled = False  # a cancel that fired as the grant came must not void the next acquire
        if not got:
            send({"type": "error", "in_reply_to": mid, "code": "held"})
            return
        path = lock.path + "/" + lock.node
        stat = self.zk.exists(path)
        if stat is None:
            # Granted on a node already gone: the session that made it has ended.
            lock.is_acquired = False
            send({"type": "error", "in_reply_to": mid, "code": "crashed", "text": "lock node %s vanished after the grant" % path})
            return
        with state:
            suspended = suspensions[0] != before
            if not suspended:
                held[key] = path
            send({"type": "acquire_ok", "in_reply_to": mid, "value": path, "token": stat.czxid})
        if suspended:
            # The connection was suspended while the acquire ran: the listener's rule says the
            # lock is not held, whatever acquire returned.
            send({"type": "lost", "key": key, "value": path})

    def release(self, mid, key, value):
        lock = self.locks.get(key)
        if lock is None or not lock.is_acquired or lock.path + "/" + lock.node != value:
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": "not held"})
            return
        with state:
            was_held = held.pop(key, None) == value
        try:
            lock.release()
        except NoNodeError:
            was_held = False
        except Exception as e:  # noqa: BLE001 -- see below
            if was_held:
                raise  # the lock node's fate is unknown: indefinite, the program is retired
            # The listener had already ended this lease, and the application logs the failed
            # release and goes on with the same session: kazoo keeps is_acquired and the lock node
            # stays for the others to wait behind (CURATOR-678's class).
            print("release after the lease was lost: %r" % e, file=sys.stderr, flush=True)
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": "released after the connection was suspended: %s" % e})
            return
        if was_held:
            send({"type": "release_ok", "in_reply_to": mid})
        else:
            send({"type": "error", "in_reply_to": mid, "code": "lost", "text": "the connection was suspended while held"})


def main():
    client = None
    for line in sys.stdin:
        m = json.loads(line)
        t, mid = m["type"], m["id"]
        try:
            if t == "init":
                client = Client(m)
                send({"type": "init_ok", "in_reply_to": mid, "library": "kazoo Lock",
                      "version": getattr(kazoo, "__version__", "2.8.0"),
                      "capabilities": {"validity": False, "token": True, "extend": False,
                                       "watchdog": True, "reentrant": False}})
            elif t == "acquire":
                client.acquire(mid, m["key"])
            elif t == "release":
                client.release(mid, m["key"], m["value"])
            else:
                send({"type": "error", "in_reply_to": mid, "code": "bad_request", "text": t})
        except Exception as e:  # noqa: BLE001 -- every failure leaves the outcome unknown
            print("request %d: %r" % (mid, e), file=sys.stderr, flush=True)
            send({"type": "error", "in_reply_to": mid, "code": failure(e), "text": str(e)})
    if client is not None:
        client.zk.remove_listener(listener)  # stopping is not losing a lock
        client.zk.stop()


if __name__ == "__main__":
    main()
