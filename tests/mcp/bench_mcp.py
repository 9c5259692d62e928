"""Latency of `xprof mcp` over stdio: spawn → initialize reply → first tools/call reply.

    XPROF_BIN=target/release/xprof XPROF_PLUGIN_DIR=target/release python3 tests/mcp/bench_mcp.py [N] [host flags...]

Standard library only. Calls `get_hosts` on the seed capture (`$XPROF_CORPUS`, default
<repo>/../shared) and prints medians over N runs (default 25). Pass `--no_cache` to measure the
uncached call; by default the result cache (a private temp dir) answers after the first run.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 25
    extra = [a for a in sys.argv[1:] if not a.isdigit()]
    xprof, plugins = os.environ["XPROF_BIN"], os.environ["XPROF_PLUGIN_DIR"]
    corpus = Path(os.environ.get("XPROF_CORPUS") or REPO.parent / "shared")
    logdir = str(corpus / "fixtures" / "seed-v6e" / "logdir")
    env = dict(os.environ, XPROF_CACHE_DIR=tempfile.mkdtemp(prefix="xprof-bench-cache-"))
    cmd = [xprof, "--no-default-plugin-dirs", "--plugin-dir", plugins, *extra, "mcp", "--root", logdir]

    def once():
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, bufsize=0)

        def send(m):
            p.stdin.write((json.dumps(m) + "\n").encode())

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
        assert json.loads(p.stdout.readline())["id"] == 1
        t1 = time.perf_counter()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "get_hosts", "arguments": {"path": logdir}}})
        reply = json.loads(p.stdout.readline())
        t2 = time.perf_counter()
        assert reply["id"] == 2 and not reply["result"]["isError"], reply
        p.stdin.close()
        p.wait()
        return (t1 - t0) * 1e3, (t2 - t0) * 1e3

    runs = [once() for _ in range(n)]
    for i, what in enumerate(["spawn -> initialize reply", "spawn -> first tools/call reply"]):
        xs = [r[i] for r in runs]
        print(f"{what}: median {statistics.median(xs):.2f} ms (min {min(xs):.2f}, max {max(xs):.2f}, n={n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
