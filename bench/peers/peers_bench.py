#!/usr/bin/env python3
"""peers_bench.py: rgpu over tcp, shm and sock against every peer build.sh built, in one run, on the
same softgpu, the same loopback and the same program binaries (bench/peers/README.md).

For each round and each system (the order rotates each round) it starts the system's server
(run_peer.sh) and runs under its client: driver_bench (a cross-check: it stops at its first
failing call), peer_bench (the driver-API rows), chatty (20 000 launches, a sync every 100),
startup (a cudart program to its first kernel: time, and round trips counted by
count_round_trips.py) and the CUDA samples. Each figure is the median over the rounds.

Writes into OUT: peers.json ({"rgpu": {METRIC: v}, "peers": {NAME: {METRIC: v}}, plus
"rgpu_shm", "rgpu_sock" (and "rgpu_tcp_staged" when run), "failures", "skipped", "runs" and "meta"; a failed
figure is null, with its reason under "failures"), table.md (also printed), ratios.png, and
rounds.md (every run's figures beside the machine's load) and rounds/ (every run's raw results).
Metric names ending in _per_s or _MiBps are better higher, all others are times, better lower.

  peers_bench.py SCRATCH [--out DIR] [--rounds N] [--systems S,...] [--samples A,B,...] [--quick]
                 [--wait-idle PCT [--wait-max S]]
  peers_bench.py SCRATCH --report-only OUT     (the outputs again from OUT/rounds/)
Normally started by peers_bench.sh, which builds the programs first.
"""
import argparse
import hashlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.environ.get("RGPU_CORPUS", os.path.join(os.path.dirname(REPO), "shared", "corpus"))
# Quick samples (each under a few seconds on softgpu) that rgpu and LUPINE both pass here.
DEFAULT_SAMPLES = ("vectorAdd vectorAddDrv matrixMulDrv asyncAPI clock simpleTemplates template "
                   "simpleAtomicIntrinsics simpleVoteIntrinsics fp16ScalarProduct simpleOccupancy "
                   "scalarProd shfl_scan simpleCallback simpleHyperQ simpleTexture "
                   "simpleDrvRuntime inlinePTX simpleAssert deviceQuery simpleAWBarrier "
                   "simpleMultiCopy").split()
BENCH_ROWS = ["null_rtt_us", "sync_launch_us", "async_launch_per_s", "h2d_pinned_64MiB_MiBps",
              "d2h_pinned_64MiB_MiBps", "h2d_pageable_64MiB_MiBps", "d2h_pageable_64MiB_MiBps",
              "chatty_s", "startup_to_first_kernel_s", "startup_round_trips",
              "h2d_pageable_64MiB_zeros_MiBps", "d2h_pageable_64MiB_zeros_MiBps", "hashcat_md5_s"]
PEER_BENCH_ROWS = BENCH_ROWS[:7] + BENCH_ROWS[10:12]
LABELS = {
    "null_rtt_us": "null call round trip (us)",
    "sync_launch_us": "launch + stream sync (us)",
    "async_launch_per_s": "async launches (per s)",
    "h2d_pinned_64MiB_MiBps": "H2D 64 MiB pinned (MiB/s)",
    "h2d_pageable_64MiB_zeros_MiBps": "H2D 64 MiB pageable, zeros (MiB/s)",
    "d2h_pageable_64MiB_zeros_MiBps": "D2H 64 MiB pageable, zeros (MiB/s)",
    "d2h_pinned_64MiB_MiBps": "D2H 64 MiB pinned (MiB/s)",
    "h2d_pageable_64MiB_MiBps": "H2D 64 MiB pageable (MiB/s)",
    "d2h_pageable_64MiB_MiBps": "D2H 64 MiB pageable (MiB/s)",
    "chatty_s": "chatty: 20 000 launches, sync every 100 (s)",
    "startup_to_first_kernel_s": "cudart start-up to first kernel done (s)",
    "startup_round_trips": "blocking round trips to first kernel",
    "samples_total_s": "samples every system passed, total wall (s)",
    "hashcat_md5_s": "hashcat: an MD5 of 4 digits cracked, cold kernel cache (s)",
}


def sample_name(metric):
    return metric[len("sample_"):-len("_s")]


def delay_ms():
    """The delay the proxy adds each way (--delay-ms, passed to run_peer.sh and here as
    RGPU_PEERS_DELAY_MS); 0: no proxy."""
    return float(os.environ.get("RGPU_PEERS_DELAY_MS", "0") or 0)


# The in-process baseline (run_peer.sh: lib/softgpu-local, the server inside the program): a column of the table
# and the denominator of "remote against local", not a peer to be ahead of.
LOCAL = "local"
# Remote against local, geometric mean of the samples' wall times (issue 21, section 3).
LOCAL_TARGETS = {"rgpu-shm": 1.05, "rgpu-tcp": 1.2}


def basis(systems):
    """The rgpu system the target is judged on: over tcp (UCX), else the first rgpu system run
    (sock behind the delay proxy)."""
    mine = [s for s in systems if s.startswith("rgpu-")]
    return "rgpu-tcp" if "rgpu-tcp" in mine else (mine[0] if mine else None)


def higher_is_better(metric):
    return metric.endswith("_per_s") or metric.endswith("_MiBps")


def load_now():
    """Load averages and the share of CPU time idle over the next second."""
    def cpu():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    i0, t0 = cpu()
    time.sleep(1)
    i1, t1 = cpu()
    with open("/proc/loadavg") as f:
        la = f.read().split()[:3]
    return {"loadavg": [float(x) for x in la], "idle_pct": round(100.0 * (i1 - i0) / max(1, t1 - t0), 1)}


def wait_idle(pct, most):
    """Waits until the CPU is at least pct% idle over a second (other users' builds), at most
    `most` seconds; says how long it waited."""
    if pct <= 0:
        return ""
    t0 = time.time()
    while load_now()["idle_pct"] < pct and time.time() - t0 < most:
        time.sleep(4)
    return " (waited %.0f s for %d%% idle)" % (time.time() - t0, pct) if time.time() - t0 > 2 else ""


def run(cmd, timeout, cwd=None, env=None):
    """Runs cmd in its own process group; returns (rc or 'timeout', stdout, stderr, seconds)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, text=True, errors="replace")
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.time() - t0
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return "timeout", out, err, time.time() - t0


def json_lines(text):
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                pass


def why(rc, out, err):
    """The outcome and the line that says most: the last one naming an error, else the last."""
    lines = [l.strip() for l in (out + "\n" + err).splitlines() if l.strip()]
    errors = [l for l in lines if re.search(r"error|fail|abort|not supported|segmentation", l, re.I)]
    tail = (errors or lines)[-1:]
    what = "timed out" if rc == "timeout" else "exit %s" % rc
    return what + (": " + tail[0][:200] if tail else "")


def samples_list():
    entries = {}
    with open(os.path.join(CORPUS, "samples.list")) as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sdir, _srcs, _flags, _aux, args, success = (line.rstrip("\n").split("|") + [""] * 7)[:7]
            entries[name] = (sdir, args.split(), success.strip())
    return entries


def hashcat_row(client, m, fail):
    """A real application (issue 21): Debian's hashcat cracks an MD5 through its CUDA backend
    (libcuda.so.1 by dlopen, kernels compiled with NVRTC and loaded through the driver API), as
    tests/e2e/hashcat.sh runs it. A fresh HOME each run: every system compiles the kernels."""
    hashcat = shutil.which("hashcat")
    if hashcat is None:
        fail["hashcat_md5_s"] = "hashcat not installed"
        return
    secret = "4321"
    digest = hashlib.md5(secret.encode()).hexdigest()
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home)
        rc, out, err, sec = run([client, hashcat, "-m", "0", "-a", "3", digest, "?d?d?d?d",
                                 "--backend-ignore-opencl", "--potfile-path",
                                 os.path.join(home, "potfile"), "--session", "peers"], 300,
                                cwd=home, env=env)
    if "%s:%s" % (digest, secret) in out and re.search(r"^Status\.*: Cracked", out, re.M):
        m["hashcat_md5_s"] = sec
    else:
        fail["hashcat_md5_s"] = why(rc, out, err)


def inner(a):
    """One system, one round: runs every program under $RGPU_PEERS_CLIENT; writes a JSON file."""
    client = os.environ["RGPU_PEERS_CLIENT"]
    progs = os.path.join(a.scratch, "progs")
    rgpu_build = os.environ.get("RGPU_BUILD", os.path.join(REPO, "build"))
    fatbin = os.path.join(rgpu_build, "lib", "rgpu-bench-kernels.fatbin")
    quick = ["--quick"] if a.quick else []
    res = {"system": a.system, "round": a.round, "metrics": {}, "failures": {},
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "load_before": load_now()}
    m, fail = res["metrics"], res["failures"]

    if delay_ms() > 0:
        # Behind the delay proxy only the programs' rows: the micro-benchmarks' thousands of
        # round trips would take hours at 10 ms each, and say only what the delay is.
        for row in PEER_BENCH_ROWS:
            fail[row] = "not measured: behind the %g ms delay proxy only programs run" % delay_ms()
    else:
        rc, out, err, sec = run([client, os.path.join(rgpu_build, "bin", "driver_bench"), fatbin] + quick, 900)
        got = list(json_lines(out))
        res["driver_bench"] = got[0] if rc == 0 and got else {"failed": why(rc, out, err)}

        rc, out, err, sec = run([client, os.path.join(progs, "peer_bench"), fatbin] + quick, 900)
        for obj in json_lines(out):
            if "error" in obj:
                e = obj["error"]
                fail[e["metric"]] = "%s: %s" % (e["call"], e["result"])
            else:
                m.update(obj)
        for row in PEER_BENCH_ROWS:
            if row not in m and row not in fail:
                fail[row] = why(rc, out, err)

    rc, out, err, sec = run([client, os.path.join(progs, "chatty")] + (["2000"] if a.quick else []), 600)
    got = [o for o in json_lines(out) if "chatty_s" in o]
    if rc == 0 and got:
        m["chatty_s"] = got[0]["chatty_s"]
    else:
        fail["chatty_s"] = why(rc, out, err)

    times = []
    for _ in range(3 if a.quick else 5):
        env = dict(os.environ, RGPU_PEERS_T0_NS=str(time.time_ns()))
        rc, out, err, sec = run([client, os.path.join(progs, "startup")], 300, env=env)
        got = [o for o in json_lines(out) if "startup_to_first_kernel_s" in o]
        if rc != 0 or not got:
            fail["startup_to_first_kernel_s"] = why(rc, out, err)
            break
        times.append(got[0]["startup_to_first_kernel_s"])
    if times and "startup_to_first_kernel_s" not in fail:
        m["startup_to_first_kernel_s"] = statistics.median(times)
    if a.system.endswith("-shm"):
        fail["startup_round_trips"] = "not countable: the data moves through shared memory, not TCP"
    elif a.system == LOCAL:
        fail["startup_round_trips"] = "not countable: no connection (the server in the program)"
    else:
        rc, out, err, sec = run([sys.executable, os.path.join(HERE, "count_round_trips.py"), "--",
                                 client, os.path.join(progs, "startup")], 600)
        got = [o for o in json_lines(out) if "round_trips" in o]
        if rc == 0 and got and got[0]["exit_code"] == 0 and got[0]["mark_seen"]:
            m["startup_round_trips"] = got[0]["round_trips"]
            res["round_trip_count"] = got[0]
        else:
            fail["startup_round_trips"] = why(rc, out, err) if not got else "program failed: %s" % got[0]

    if a.system.startswith("rgpu-"):
        # rgpu's own count (its client traces each call it waits for at RGPU_LOG=debug): the calls
        # alone, without connection set-up; works over shm too. A cross-check, not a table row.
        env = dict(os.environ, RGPU_LOG="debug", RGPU_PEERS_EXIT_AT_MARK="1")
        rc, out, err, sec = run([client, os.path.join(progs, "startup")], 300, env=env)
        calls = re.findall(r"round trip \d+: (\w+)", err)
        res["startup_calls_waited"] = {"count": len(calls), "calls": calls} if rc == 0 and calls else None

    entries = samples_list()
    src, bins = os.path.join(a.scratch, "samples", "src", "Samples"), os.path.join(a.scratch, "samples", "bin")
    for name in a.samples:
        key = "sample_%s_s" % name
        exe = os.path.join(bins, name, name)
        if name not in entries or not os.path.exists(exe):
            fail[key] = "not built"
            continue
        sdir, args, success = entries[name]
        rc, out, err, sec = run([client, exe] + args, 300, cwd=os.path.join(src, sdir))
        if rc == 0 and (success in ("", "-") or re.search(success, out + err)):
            m[key] = sec
        else:
            fail[key] = why(rc, out, err)
    hashcat_row(client, m, fail)
    res["load_after"] = load_now()
    with open(a.inner_out, "w") as f:
        json.dump(res, f, indent=1)


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, int) or (abs(v) >= 1000 and float(v).is_integer()):
        return str(int(v))
    return "%.3g" % v if abs(v) < 1000 else "%.0f" % v


def ratio(metric, mine, theirs):
    if mine is None or theirs is None or mine == 0 or theirs == 0:
        return None
    return mine / theirs if higher_is_better(metric) else theirs / mine


def aggregate(a, systems, runs, skipped):
    metrics, failures = {}, {}
    for s in systems:
        rs = [r for r in runs if r["system"] == s]
        vals, fails = {}, {}
        for r in rs:
            for k, v in r["metrics"].items():
                vals.setdefault(k, []).append(v)
            for k, v in r["failures"].items():
                fails.setdefault(k, []).append(v)
        metrics[s] = {k: statistics.median(v) for k, v in vals.items()}
        failures[s] = {}
        for k, v in fails.items():
            note = v[0] if len(v) == len(rs) else "failed in %d of %d rounds: %s" % (len(v), len(rs), v[0])
            failures[s][k] = note
            if len(v) == len(rs):
                metrics[s][k] = None
    sample_keys = ["sample_%s_s" % n for n in a.samples]
    passed_all = [k for k in sample_keys if all(metrics[s].get(k) is not None for s in systems)]
    for s in systems:
        metrics[s]["samples_total_s"] = sum(metrics[s][k] for k in passed_all) if passed_all else None
    rows = BENCH_ROWS + ["samples_total_s"] + sample_keys
    for s in systems:
        for k in rows:
            metrics[s].setdefault(k, None)
    return metrics, failures, rows, passed_all


def against_local(a, metrics, systems):
    """{rgpu system: its wall times over local's}: the geometric mean (and range) over the samples
    both passed, the chatty workload and the start-up; {} when local did not run."""
    if LOCAL not in metrics:
        return {}
    local = metrics[LOCAL]
    out = {}
    for m in [s for s in systems if s.startswith("rgpu-")]:
        keys = ["sample_%s_s" % n for n in a.samples]
        ratios = [metrics[m][k] / local[k] for k in keys if metrics[m].get(k) and local.get(k)]
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None

        def over(k):
            return metrics[m][k] / local[k] if metrics[m].get(k) and local.get(k) else None
        out[m] = {"samples_geomean": geo, "samples": len(ratios),
                  "samples_min": min(ratios) if ratios else None, "samples_max": max(ratios) if ratios else None,
                  "chatty": over("chatty_s"), "startup": over("startup_to_first_kernel_s")}
    return out


def table(metrics, failures, rows, systems, peers):
    mine = [s for s in systems if s.startswith("rgpu-")]
    head = ["metric"] + systems + ["%s/%s" % (m.replace("rgpu-", "rgpu "), p) for m in mine for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    behind = []
    for k in rows:
        cells = [LABELS.get(k, "sample %s (s)" % sample_name(k))]
        for s in systems:
            v = metrics[s].get(k)
            na = failures[s].get(k, "").startswith(("not countable", "not measured"))
            cells.append("n/a" if na else "FAIL" if v is None and k in failures[s] else fmt(v))
        for m in mine:
            for p in peers:
                r = ratio(k, metrics[m].get(k), metrics[p].get(k))
                if r is None and failures[m].get(k, "").startswith("not countable"):
                    cells.append("-")
                elif r is None:
                    mv, pv = metrics[m].get(k), metrics[p].get(k)
                    cells.append("rgpu only" if mv is not None and pv is None and k in failures[p]
                                 else ("peer only" if pv is not None and mv is None else "-"))
                else:
                    cells.append("%.2f" % r)
                if m == basis(systems) and (r is not None and r <= 1.0 or
                                        (metrics[m].get(k) is None and metrics[p].get(k) is not None)):
                    behind.append((k, p, r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), behind


def rounds_table(runs, rows):
    """Every run's figures beside the machine's load then: how much the figures moved."""
    shown = [k for k in rows if not k.startswith("sample")]
    head = ["run", "load1 before/after", "idle % before/after", "seconds"] + shown
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in runs:
        lb, la = r.get("load_before") or {}, r.get("load_after") or {}
        cells = ["%s.%s" % (r["system"], r["round"]),
                 "%s/%s" % ((lb.get("loadavg") or ["-"])[0], (la.get("loadavg") or ["-"])[0]),
                 "%s/%s" % (lb.get("idle_pct", "-"), la.get("idle_pct", "-")), str(r.get("seconds", "-"))]
        cells += ["FAIL" if k in r["failures"] and k not in r["metrics"] else fmt(r["metrics"].get(k)) for k in shown]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def chart(path, metrics, rows, systems, peers):
    mine = [s for s in systems if s.startswith("rgpu-")]
    cols = [(m, p) for m in mine for p in peers]
    data = []
    for k in rows:
        rs = [ratio(k, metrics[m].get(k), metrics[p].get(k)) for m, p in cols]
        if any(r is not None for r in rs):
            data.append((k, rs))
    if not data or not cols:
        return False
    dat = path + ".dat"
    with open(dat, "w") as f:
        f.write("metric " + " ".join("%s/%s" % (m, p) for m, p in cols) + "\n")
        for k, rs in data:
            label = sample_name(k) if k.startswith("sample_") else re.sub(r"_(us|s|MiBps|per_s)$", "", k.replace("_64MiB", ""))
            f.write('"%s" %s\n' % (label, " ".join("%.6g" % r if r else "NaN" for r in rs)))
    plots = ", ".join("'%s' using %d:xtic(1) title columnhead" % (dat, i + 2) for i in range(len(cols)))
    script = f"""set terminal pngcairo size 1400,650 font ',9' noenhanced
set output '{path}'
set title 'rgpu against each peer, per row (>1: rgpu ahead; log scale)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics
set xtics rotate by -45 scale 0
set key top left
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb 'red'
plot {plots}
"""
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
    return p.returncode == 0


def build_samples(a):
    """Builds the samples into SCRATCH/samples/bin from a copy of the corpus (they write beside
    their sources), with the corpus's own build.sh (idempotent)."""
    base = os.path.join(a.scratch, "samples")
    if not os.path.isdir(os.path.join(base, "src")):
        os.makedirs(base, exist_ok=True)
        subprocess.run(["cp", "-r", os.path.join(CORPUS, "cuda-samples"), os.path.join(base, "src.part")], check=True)
        os.rename(os.path.join(base, "src.part"), os.path.join(base, "src"))
    env = dict(os.environ, SAMPLES_SRC=os.path.join(base, "src"), JOBS=os.environ.get("JOBS", "2"))
    p = subprocess.run([os.path.join(CORPUS, "build.sh"), os.path.join(base, "bin")] + a.samples,
                       env=env, capture_output=True, text=True)
    print((p.stdout.strip().splitlines() or ["samples: build.sh said nothing"])[-1], flush=True)


def outer(a):
    build_samples(a)
    status = peer_status(a.scratch)
    peers = [p for p, st in status.items() if st and st[0] == "OK"]
    if a.delay_ms > 0:
        # Only systems whose client reaches its server through one address the proxy can stand
        # in for (run_peer.sh refuses the others).
        os.environ["RGPU_PEERS_DELAY_MS"] = "%g" % a.delay_ms
        systems = a.systems or (["rgpu-sock"] + [p for p in peers if p == "lupine"])
    else:
        systems = a.systems or (["rgpu-tcp", "rgpu-shm", "rgpu-sock"] + peers + [LOCAL])
    out = os.path.abspath(a.out or os.path.join(a.scratch, "results", time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(os.path.join(out, "rounds"), exist_ok=True)
    runs, started = [], time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with open(os.path.join(out, "started"), "w") as f:
        f.write(started + "\n")
    for rnd in range(a.rounds):
        order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
        for s in order:
            path = os.path.join(out, "rounds", "%s.%d.json" % (s, rnd + 1))
            cmd = [os.path.join(HERE, "run_peer.sh"), a.scratch, s, "--outer", "--",
                   sys.executable, os.path.abspath(__file__), a.scratch, "--inner", s,
                   "--inner-out", path, "--round", str(rnd + 1),
                   "--samples", ",".join(a.samples)] + (["--quick"] if a.quick else [])
            waited = wait_idle(a.wait_idle, a.wait_max)
            print("round %d/%d: %s%s" % (rnd + 1, a.rounds, s, waited), flush=True)
            rc, sout, serr, sec = run(cmd, 7200)
            if os.path.exists(path):
                with open(path) as f:
                    runs.append(json.load(f))
            else:
                runs.append({"system": s, "round": rnd + 1, "metrics": {},
                             "failures": {k: "server or harness failed: " + why(rc, sout, serr) for k in BENCH_ROWS}})
            runs[-1]["seconds"] = round(sec, 1)
            with open(path, "w") as f:
                json.dump(runs[-1], f, indent=1)
    report(a, out, systems, runs, started)


def peer_status(scratch):
    status = {}
    for peer in ("lupine", "cricket", "gvirtus"):
        try:
            with open(os.path.join(scratch, peer, "STATUS")) as f:
                status[peer] = f.read().splitlines()
        except OSError:
            status[peer] = ["SKIPPED: not built (run build.sh)"]
    return status


def rerender(a):
    """--report-only OUT: the outputs again from OUT/rounds/*.json (say, after a change here)."""
    out = os.path.abspath(a.report_only)
    runs = []
    for name in sorted(os.listdir(os.path.join(out, "rounds"))):
        if name.endswith(".json"):
            with open(os.path.join(out, "rounds", name)) as f:
                runs.append(json.load(f))
    runs.sort(key=lambda r: (r["round"], r.get("started", "")))
    order = ["rgpu-tcp", "rgpu-shm", "rgpu-sock", "rgpu-tcp-staged", LOCAL]
    found = {r["system"] for r in runs}
    systems = [s for s in order if s in found] + sorted(found - set(order))
    keys = {k for r in runs for k in list(r["metrics"]) + list(r["failures"]) if k.startswith("sample_")}
    if a.samples == DEFAULT_SAMPLES:
        a.samples = [n for n in DEFAULT_SAMPLES if "sample_%s_s" % n in keys] + \
                    sorted(sample_name(k) for k in keys if sample_name(k) not in DEFAULT_SAMPLES)
    a.rounds = max(r["round"] for r in runs)
    try:
        with open(os.path.join(out, "started")) as f:
            started = f.read().strip()
    except OSError:
        started = "unknown"
    report(a, out, systems, runs, started)


def report(a, out, systems, runs, started):
    status = peer_status(a.scratch)
    skipped = {p: st[0][len("SKIPPED: "):] for p, st in status.items() if not st or st[0] != "OK"}
    peers = [s for s in systems if not s.startswith("rgpu-") and s != LOCAL]
    metrics, failures, rows, passed_all = aggregate(a, systems, runs, skipped)
    remote_vs_local = against_local(a, metrics, systems)
    text, behind = table(metrics, failures, rows, systems, peers)
    rgpu_build = os.environ.get("RGPU_BUILD", os.path.join(REPO, "build"))
    try:
        with open(os.path.join(rgpu_build, "COMMIT")) as f:
            commit = f.read().strip() + " (copied into %s)" % rgpu_build
    except OSError:
        commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip() + " (%s)" % rgpu_build
    loads = [r[k] for r in runs for k in ("load_before", "load_after") if k in r]
    meta = {"started": started, "ended": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rounds": a.rounds,
            "wait_idle_pct": a.wait_idle, "delay_ms_each_way": delay_ms(), "rgpu_basis": basis(systems),
            "quick": a.quick, "rgpu_commit": commit, "cpus": os.cpu_count(),
            "peer_sources": {p: status[p][1] if len(status[p]) > 1 else "" for p in peers},
            "load1_range": [min(l["loadavg"][0] for l in loads), max(l["loadavg"][0] for l in loads)] if loads else None,
            "idle_pct_range": [min(l["idle_pct"] for l in loads), max(l["idle_pct"] for l in loads)] if loads else None,
            "samples_passed_by_all": [sample_name(k) for k in passed_all],
            "higher_is_better": "metric names ending in _per_s or _MiBps; all others are times, lower is better"}
    doc = {"rgpu": metrics.get(basis(systems), {}),
           "peers": {p: metrics[p] for p in peers},
           **{s.replace("-", "_"): metrics[s] for s in systems if s.startswith("rgpu-") and s != basis(systems)},
           **({LOCAL: metrics[LOCAL], "remote_vs_local": remote_vs_local} if LOCAL in metrics else {}),
           "failures": failures, "skipped": skipped,
           "driver_bench": {r["system"] + "." + str(r["round"]): r.get("driver_bench") for r in runs},
           "round_trips_detail": {r["system"] + "." + str(r["round"]): {
               "strace": r.get("round_trip_count"), "client_counted_calls": r.get("startup_calls_waited")}
               for r in runs},
           "runs": [{k: r.get(k) for k in ("system", "round", "seconds", "load_before", "load_after")} for r in runs],
           "meta": meta}
    with open(os.path.join(out, "peers.json"), "w") as f:
        json.dump(doc, f, indent=1)
    notes = ["", "Ratios: rgpu's figure over the peer's for rates, the peer's over rgpu's for times: >1 means rgpu is ahead.",
             "Load (1-min average) %s, idle %s%% of CPU; %d round(s); rgpu %s." % (
                 meta["load1_range"], meta["idle_pct_range"], a.rounds, commit)]
    notes.append("Round trips to the first kernel, per system (strace: exchanges + TCP connects | "
                 "the client's own count of calls waited for, rgpu only):")
    for s in systems:
        st = [r["round_trip_count"] for r in runs if r["system"] == s and r.get("round_trip_count")]
        own = [r["startup_calls_waited"] for r in runs if r["system"] == s and r.get("startup_calls_waited")]
        notes.append("- %s: %s | %s" % (
            s, ", ".join("%d+%d" % (c["exchanges"], c["connects"]) for c in st) or "-",
            ", ".join("%d (%s)" % (c["count"], " ".join(c["calls"])) for c in own[:1]) or "-"))
    if remote_vs_local:
        notes.append("Remote against local (the server in the program, softgpu-local), each system's time over local's:")
        for m, r in remote_vs_local.items():
            target = LOCAL_TARGETS.get(m)
            notes.append("- %s: samples %s (geometric mean of %d, [%s .. %s])%s; chatty %s; start-up %s" % (
                m, fmt(r["samples_geomean"]), r["samples"], fmt(r["samples_min"]), fmt(r["samples_max"]),
                "" if target is None or r["samples_geomean"] is None else
                " against a target of %.2f: %s" % (target, "met" if r["samples_geomean"] <= target else "missed"),
                fmt(r["chatty"]), fmt(r["startup"])))
    notes.append("Failures:")
    for s in systems:
        for k, v in sorted(failures[s].items()):
            notes.append("- %s, %s: %s" % (s, k, v))
    for p, w in skipped.items():
        notes.append("- %s skipped: %s" % (p, w))
    if behind:
        notes.append("")
        notes.append("Rows where rgpu over tcp is not ahead:")
        for k, p, r in behind:
            notes.append("- %s vs %s: %s" % (k, p, "%.2f" % r if r is not None else "rgpu failed"))
    text = text + "\n" + "\n".join(notes) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "rounds.md"), "w") as f:
        f.write(rounds_table(runs, rows))
    png = chart(os.path.join(out, "ratios.png"), metrics, rows, systems, peers)
    print(text)
    print("results: %s (peers.json, table.md, rounds.md%s, rounds/)" % (out, ", ratios.png" if png else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scratch")
    p.add_argument("--out")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--systems", type=lambda s: s.split(","))
    p.add_argument("--samples", type=lambda s: [x for x in s.split(",") if x], default=DEFAULT_SAMPLES)
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke test)")
    p.add_argument("--wait-idle", type=int, default=0, metavar="PCT",
                   help="before each system's run, wait until the CPU is PCT%% idle (0: never)")
    p.add_argument("--wait-max", type=int, default=600, metavar="S", help="... for at most S seconds")
    p.add_argument("--delay-ms", type=float, default=0, metavar="D",
                   help="run every system behind bench/latency_proxy adding D ms each way (programs only)")
    p.add_argument("--report-only", metavar="OUT", help="only make the outputs again from OUT/rounds/")
    p.add_argument("--inner", dest="system", help=argparse.SUPPRESS)
    p.add_argument("--inner-out", help=argparse.SUPPRESS)
    p.add_argument("--round", type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args()
    a.scratch = os.path.abspath(a.scratch)
    if a.system:
        inner(a)
    elif a.report_only:
        rerender(a)
    else:
        outer(a)


if __name__ == "__main__":
    main()
