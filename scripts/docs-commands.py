#!/usr/bin/python3
"""Runs every command of the README and docs/*.md that the docs mark as runnable, as a newcomer
would type it: in a fresh clone of the committed HEAD, after `make build`, from the clone's top
directory, with bin/ on PATH and stdin closed. Fails when a command's exit code is not the one the
doc gives, or its output no longer contains what the doc shows.

The marker is an HTML comment on the line before a fenced code block (invisible on the page):

    <!-- runnable -->
    ```sh
    bin/lockpick scenario --list                # every line is a command; exit 0 expected
    bin/lockpick run --lock single --bad        # a comment saying "exit 255" expects that code
    ```

In a block whose commands start with "$ ", the lines after a command, up to the next "$ ", are
output the command must print (each line somewhere in its stdout or stderr, spaces squeezed; a line
"..." stands for lines left out). Mark only quick commands (help, lists, dry runs, short runs,
check): each must end within TIMEOUT seconds.

Usage: scripts/docs-commands.py [--here]   (--here: run in this checkout, with its bin/ as built)
Environment: KEEP=1 keeps the clone; TIMEOUT (default 60) seconds per command.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARKER = "<!-- runnable -->"
EXIT = re.compile(r"\s#\s.*?\bexit (\d+)")


def blocks(path):
    """Yields (line number, lines) of each fenced block marked runnable in path."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"{path}:{i + 1}: {MARKER} must be followed by a fenced code block")
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            yield i + 3, lines[i + 2:end]
            i = end
        i += 1


def commands(first, lines):
    """Yields (line number, command, expected exit code, expected output lines) of one block."""
    prompt = any(l.startswith("$ ") for l in lines)
    i = 0
    while i < len(lines):
        line, at = lines[i], first + i
        i += 1
        if prompt and not line.startswith("$ "):
            continue
        cmd = line[2:] if prompt else line
        if not cmd.strip() or cmd.lstrip().startswith("#"):
            continue
        while cmd.endswith("\\") and i < len(lines):
            cmd = cmd[:-1] + " " + lines[i].strip()
            i += 1
        out = []
        while prompt and i < len(lines) and not lines[i].startswith("$ "):
            if lines[i].strip() not in ("", "..."):
                out.append(lines[i])
            i += 1
        m = EXIT.search(cmd)
        yield at, cmd, int(m.group(1)) if m else 0, out


def squeeze(s):
    return " ".join(s.split())


def run(top, where, cmd, want, out, timeout):
    """Runs one command in top; returns a failure sentence, or None."""
    env = dict(os.environ, PATH=os.path.join(top, "bin") + os.pathsep + os.environ.get("PATH", ""))
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS", "ARGS", "STORE", "SEED", "TIME_LIMIT"):
        env.pop(k, None)
    began = time.monotonic()
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=top, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        print((e.output or b"").decode(errors="replace")[-2000:])
        return f"{where}: did not end within {timeout} s (mark only quick commands): {cmd}"
    took = time.monotonic() - began
    text = p.stdout.decode(errors="replace")
    missing = [l for l in out if squeeze(l) not in squeeze(text)]
    status = "ok" if p.returncode == want and not missing else "FAILED"
    print(f"docs-commands: {where}: {status} (exit {p.returncode}, {took:.1f} s): {cmd}", flush=True)
    if status == "ok":
        return None
    print(text[-3000:], flush=True)
    if p.returncode != want:
        return f"{where}: exit {p.returncode}, the doc says {want}: {cmd}"
    return f"{where}: the output lacks {missing[0]!r} that the doc shows: {cmd}"


def clone(src, work):
    """A fresh clone of src's committed HEAD in work, built with make build, as a newcomer has it."""
    top = os.path.join(work, "lockpick")
    subprocess.run(["git", "clone", "-q", src, top], check=True)
    rev = subprocess.run(["git", "-C", top, "rev-parse", "--short=12", "HEAD"], check=True,
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout
    note = " (uncommitted changes are not tested)" if dirty else ""
    print(f"docs-commands: fresh clone of {rev} in {top}{note}; make build", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    subprocess.run(["make", "-s", "build"], cwd=top, env=env, check=True, stdin=subprocess.DEVNULL)
    return top


def main():
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    timeout = int(os.environ.get("TIMEOUT", "60"))
    work = None
    if "--here" in sys.argv[1:]:
        top = src
    else:
        work = tempfile.mkdtemp(prefix="lockpick-docs-")
        top = clone(src, work)
    began = time.monotonic()
    files = [os.path.join(top, "README.md")] + sorted(glob.glob(os.path.join(top, "docs", "*.md")))
    failures, n, nblocks, nfiles = [], 0, 0, 0
    try:
        for path in files:
            found = list(blocks(path))
            nfiles += bool(found)
            for first, lines in found:
                nblocks += 1
                for at, cmd, want, out in commands(first, lines):
                    n += 1
                    fail = run(top, f"{os.path.relpath(path, top)}:{at}", cmd, want, out, timeout)
                    if fail:
                        failures.append(fail)
    finally:
        if work and os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        elif work:
            print(f"docs-commands: clone kept in {top}")
    took = time.monotonic() - began
    if n == 0:
        print(f"docs-commands: no command is marked {MARKER}: nothing was checked", file=sys.stderr)
        return 1
    if failures:
        print(f"docs-commands: {len(failures)} of {n} commands are not as the docs say:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"docs-commands: {n} commands from {nblocks} blocks in {nfiles} files, all as documented ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
