"""Client programs that break the client protocol, one per mode, for the driver's tests.

Each mode answers init well unless the mode is about init, then misbehaves on the first acquire.
Mode "good" follows the protocol (leases are not real: the tests exercise the driver, not a lock).
"""
import json
import os
import subprocess
import sys
import time

mode = sys.argv[1]


def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()


def init_ok(mid, **caps):
    c = {"validity": False, "token": False, "extend": True, "watchdog": False, "reentrant": False}
    c.update(caps)
    send({"type": "init_ok", "in_reply_to": mid, "library": "bad", "version": "0", "capabilities": c})


if mode == "exit-at-once":
    print("cannot connect to anything", file=sys.stderr)
    sys.exit(3)
if mode == "child":
    # A program that starts a helper of its own: the helper must die with it.
    subprocess.Popen(["sleep", "1000"])
    print("child %d" % os.getpid(), file=sys.stderr, flush=True)

n = 0
for line in sys.stdin:
    m = json.loads(line)
    mid = m["id"]
    if m["type"] == "init":
        if mode == "garbage":
            print("Connecting to redis...", flush=True)
            continue
        if mode == "hang-init":
            print("thinking", file=sys.stderr, flush=True)
            continue
        if mode == "partial-exit":
            sys.stdout.write('{"type": "init_ok", "in_re')
            sys.stdout.flush()
            sys.exit(0)
        init_ok(mid, validity=(mode == "validity-missing"))
        continue
    n += 1
    if mode in ("good", "child"):
        if m["type"] == "acquire":
            send({"type": "acquire_ok", "in_reply_to": mid, "value": "v%d" % n})
        else:
            send({"type": m["type"] + "_ok", "in_reply_to": mid})
    elif mode == "unknown-id":
        send({"type": "acquire_ok", "in_reply_to": mid + 1000, "value": "v"})
    elif mode == "twice":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v1"})
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v2"})
    elif mode == "no-value":
        send({"type": "acquire_ok", "in_reply_to": mid})
    elif mode == "negative-validity":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "validity_ms": -5})
    elif mode == "validity-missing":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v"})
    elif mode == "huge-line":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "text": "x" * 200000})
    elif mode == "unknown-field":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "validty_ms": 1000})
    elif mode == "wrong-type":
        send({"type": "release_ok", "in_reply_to": mid})
    elif mode == "foreign-event":
        send({"type": "lost", "key": m["key"], "value": "not-mine"})
    elif mode == "close-stdout":
        os.close(1)
        time.sleep(1000)
    elif mode == "exit-mid-run":
        sys.exit(0)
    elif mode == "string-id":
        send({"type": "acquire_ok", "in_reply_to": str(mid), "value": "v"})
    elif mode == "late":
        # The first acquire answers after the harness stopped waiting; later ones at once.
        if n == 1:
            time.sleep(0.6)
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v%d" % n})
    elif mode == "huge-validity":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "validity_ms": 3600000})
    elif mode == "depth":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "depth": 2})
    elif mode == "token":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "token": 7})
    elif mode == "other-key":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v", "key": "lockpick:other"})
    elif mode == "empty-line":
        sys.stdout.write("\n")
        sys.stdout.flush()
    elif mode == "renew-at-once":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "v%d" % n})
        send({"type": "renewed", "key": m["key"], "value": "v%d" % n, "validity_ms": 500})
    elif mode == "clock":
        send({"type": "acquire_ok", "in_reply_to": mid, "value": "%.6f" % time.time()})
    elif mode == "hang":
        pass
