#!/usr/bin/python3
"""Lists the releases whose invoke fell inside a nemesis fault window of a run, with how each ended:
the evidence that a fault aimed at releases (curator-678-release-cut) hit them, which the report's
fault windows alone do not show.

Usage: scripts/releases-in-faults.py RUN_DIR...   (each a run directory holding history.jsonl)
Exit 0; 255 with one line when a directory has no readable history.
"""
import json
import os
import sys


def windows(events):
    """The [fault, heal) windows of the nemesis process (-1), from each fault's info to its heal's."""
    out, start = [], None
    for e in events:
        if e.get("process") != -1 or e.get("type") != "info":
            continue
        if e.get("effect") == "fault":
            start = e["time"]
        elif e.get("effect") == "heal" and start is not None:
            out.append((start, e["time"]))
            start = None
    return out


def main(dirs):
    for d in dirs:
        path = os.path.join(d, "history.jsonl")
        try:
            events = [json.loads(line) for line in open(path)]
        except (OSError, ValueError) as err:
            print(f"{path}: {err}: give a run directory of lockpick's store", file=sys.stderr)
            return 255
        cuts = windows(events)
        invoked, inside = {}, 0
        releases = 0
        for e in events:
            if e.get("f") != "release":
                continue
            if e["type"] == "invoke":
                releases += 1
                if any(a <= e["time"] < b for a, b in cuts):
                    invoked[e["process"]] = e["time"]
                    inside += 1
            elif e["process"] in invoked:
                at = invoked.pop(e["process"])
                print(f"  p{e['process']} release at {at / 1e9:.3f}s -> {e['type']} {e.get('error', '')[:100]}")
        print(f"{d}: {len(cuts)} fault windows, {releases} releases, {inside} invoked inside a window")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: scripts/releases-in-faults.py RUN_DIR...", file=sys.stderr)
        sys.exit(255)
    sys.exit(main(sys.argv[1:]))
