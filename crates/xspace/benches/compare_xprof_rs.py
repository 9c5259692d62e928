#!/usr/bin/env python3
"""Whole-process comparison: examples/xspace_scan vs `xprof-rs aggregate_xplane_events`.

Runs the two tools interleaved (A, B, A, B ...) so that the load of a shared machine hits both
alike; prints medians of wall time and of CPU time (user + system, from getrusage) and the ratios.
Peak RSS: measure with `/usr/bin/time -f %M` (getrusage's children maximum is not per process).

usage: compare_xprof_rs.py [RUNS]   (env: XSPACE_SCAN, XPROF_RS, XPROF_CORPUS, XPROF_BENCH_DATA)
Build first: cargo build --release -p xprof-xspace --example xspace_scan
"""
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCAN = os.environ.get("XSPACE_SCAN", os.path.join(ROOT, "target/release/examples/xspace_scan"))
XPROF_RS = os.environ.get("XPROF_RS", "/work/venv-xprofrs/bin/xprof-rs")
CORPUS = os.environ.get("XPROF_CORPUS", os.path.join(ROOT, "..", "shared"))
DATA = os.environ.get("XPROF_BENCH_DATA", "/work/bench-data")
INPUTS = {
    "seed": os.path.join(CORPUS, "fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb"),
    "x200": os.path.join(DATA, "seed_x200.xplane.pb"),
    "jax-large": os.path.join(
        DATA, "jax-large/logdir/plugins/profile/transformer_train/host0.xplane.pb"),
}


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    print("load average", os.getloadavg())
    print("| input | ours: wall (CPU) | xprof-rs: wall (CPU) | wall ratio | CPU ratio |")
    print("| --- | --- | --- | ---: | ---: |")
    for name, path in INPUTS.items():
        if not os.path.exists(path):
            print(f"| {name} | skipped: {path} missing | | | |")
            continue
        ours, theirs = [], []
        for i in range(runs + 3):  # the first 3 pairs warm the page cache
            a = run([SCAN, path])
            b = run([XPROF_RS, "aggregate_xplane_events", path])
            if i >= 3:
                ours.append(a)
                theirs.append(b)
        ow = statistics.median(w for w, _ in ours)
        tw = statistics.median(w for w, _ in theirs)
        oc = statistics.median(c for _, c in ours)
        tc = statistics.median(c for _, c in theirs)
        print(f"| {name} | {ow * 1e3:.1f} ms ({oc * 1e3:.1f}) | {tw * 1e3:.1f} ms ({tc * 1e3:.1f}) "
              f"| {ow / tw:.2f} | {oc / tc:.2f} |")
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
