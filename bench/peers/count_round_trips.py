#!/usr/bin/env python3
"""count_round_trips.py: counts the blocking round trips a program makes to its GPU server over
TCP, the same way for every system: it runs the program under strace and reads the order in
which the program's process (all its threads) sent and received data on its TCP sockets.

A round trip is counted each time the process receives data after having sent some since it
last received (one "exchange": a request answered before the next request leaves), plus one per
TCP connect (the handshake the first request waits for). Requests that travel without waiting
for an answer (posted, fire-and-forget, batched) add no exchange: they ride with the next one.
Data the server sends unasked and that arrives right after earlier data (no send in between)
is counted apart as "unsolicited". Only events before the program's mark count: the first
access(2) of MARK (bench/peers/startup.cu touches /rgpu-peers-first-kernel when its first
kernel has finished); without a mark, the whole run.

Limits: it needs the data on TCP (not rgpu's shm:// transport, whose data moves through shared
memory); strace slows every system call it traces, so the run's time is not the program's.

  count_round_trips.py [--mark PATH] [--trace FILE] -- COMMAND [ARGS...]
Prints one JSON object: round_trips, exchanges, connects, unsolicited, sent_bytes,
received_bytes, mark_seen, exit_code.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SEND = {"write", "writev", "sendto", "sendmsg", "sendmmsg", "pwrite64", "pwritev", "pwritev2"}
RECV = {"read", "readv", "recvfrom", "recvmsg", "recvmmsg", "pread64", "preadv", "preadv2"}
LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^(\w+)\((.*)$")
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
RESULT = re.compile(r"\)\s+=\s+(-?\d+)")
TCP_FD = re.compile(r"^\d+<TCP(?:v6)?:\[")


def count(trace_path, mark):
    pending = {}  # tid -> (syscall, start of its arguments) of an unfinished call
    stats = dict(exchanges=0, connects=0, unsolicited=0, sent_bytes=0, received_bytes=0,
                 mark_seen=False)
    last = None  # "S" or "R": the previous data event on a TCP socket
    with open(trace_path, errors="replace") as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            if not m:
                continue
            tid, rest = m.group(1), m.group(2)
            if rest.endswith("<unfinished ...>"):
                c = CALL.match(rest)
                if c:
                    pending[tid] = (c.group(1), c.group(2))
                continue
            r = RESUMED.match(rest)
            if r:
                name, args = pending.pop(tid, (r.group(1), ""))
                args = args + r.group(2)
            else:
                c = CALL.match(rest)
                if not c:
                    continue
                name, args = c.group(1), c.group(2)
            if name == "access" and mark and mark in args:
                stats["mark_seen"] = True
                break
            res = RESULT.search(args)
            if not res:
                continue
            ret = int(res.group(1))
            if name == "connect" and TCP_FD.match(args) and (ret == 0 or "EINPROGRESS" in args):
                stats["connects"] += 1
                continue
            if ret <= 0 or not TCP_FD.match(args):
                continue
            if name in SEND:
                stats["sent_bytes"] += ret if name != "sendmmsg" else 0
                last = "S"
            elif name in RECV:
                stats["received_bytes"] += ret if name != "recvmmsg" else 0
                if last == "S":
                    stats["exchanges"] += 1
                elif last == "R":
                    stats["unsolicited"] += 1
                last = "R"
    stats["round_trips"] = stats["exchanges"] + stats["connects"]
    return stats


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mark", default="/rgpu-peers-first-kernel")
    p.add_argument("--trace", help="keep strace's output here")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no command")
    trace = a.trace or tempfile.mktemp(prefix="rgpu-peers-strace-")
    syscalls = "connect,access," + ",".join(sorted(SEND | RECV))
    rc = subprocess.call(["strace", "-f", "-qq", "-yy", "-s", "0", "--seccomp-bpf",
                          "-e", "trace=" + syscalls, "-e", "signal=none", "-o", trace] + cmd,
                         stdout=subprocess.DEVNULL)
    stats = count(trace, a.mark)
    stats["exit_code"] = rc
    if not a.trace:
        os.unlink(trace)
    print(json.dumps(stats))


if __name__ == "__main__":
    sys.exit(main())
