#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Python package's costs (docs/performance.md, "Python"):

1. eval overhead: Dump.eval from Python against kvscope-cli's own eval time on the PyTorch-peer
   workload (4 layers, T 4096, H 32, KVH 8, D 128, Tq 64, int4 g128 on K and V). The CLI's
   in-process time is that of `eval --json` less that of `eval --explain` (the same start, open
   and resolution, then exit); both best of --runs. Target: ≤ 5 % over the CLI.
2. Ctrl-C: time from SIGINT to KeyboardInterrupt out of a running Dump.eval.
3. sweep throughput: pairs per second of kvscope.sweep on LocalClusters of 1, 2, … workers (one
   core each: OMP_NUM_THREADS=1), on the tests' 6 × 3 corpus and on a corpus of 6 larger dumps.
   Target: 2 workers ≥ 1.7 × one.

    PYTHONPATH=build/release/python /usr/bin/python3 tests/perf/python_bench.py \
        [--cli build/release/app/kvscope-cli] [--runs 5] [--workers 1,2] [--only eval,interrupt,sweep]
        [--temp-dir DIR] [--json out.json]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = "int4,group=128"
SETTINGS = ["kivi-2", "llamacpp-q4_0", ("int4,axis=channel,group=32", "int8")]


def run(cli, *args):
    r = subprocess.run([cli] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("python_bench: kvscope-cli %s failed: %s" % (" ".join(map(str, args)), r.stderr))
    return r


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def bench_eval(cli, tmp, runs):
    import kvscope
    path = os.path.join(tmp, "peer.h5")
    t0 = time.perf_counter()
    run(cli, "synth", path, "--quiet", "--layers", 4, "--tokens", 4096, "--heads", 32, "--kv-heads", 8,
        "--head-dim", 128, "--queries", 64, "--seed", 1)
    generate = time.perf_counter() - t0
    out = os.path.join(tmp, "cli.json")
    cli_total = timed(lambda: run(cli, "eval", path, "--key", SPEC, "--value", SPEC, "--json", out), runs)
    cli_fixed = timed(lambda: run(cli, "eval", path, "--key", SPEC, "--value", SPEC, "--explain"), runs)
    dump = kvscope.open(path)
    report = {}
    py = timed(lambda: report.update(dump.eval(key=SPEC, value=SPEC)), runs)
    with open(out) as f:
        assert report == json.load(f), "Python's report differs from the CLI's"
    py_open = timed(lambda: kvscope.open(path), runs)
    cli_eval = (cli_total[0] - cli_fixed[0], cli_total[1] - cli_fixed[1])
    return {
        "shape": "L=4 T=4096 H=32 KVH=8 D=128 Tq=64, K and V %s" % SPEC,
        "generate_s": generate,
        "cli_eval_json_s": cli_total, "cli_explain_s": cli_fixed, "cli_in_process_s": cli_eval,
        "python_eval_s": py, "python_open_s": py_open,
        "overhead_best": py[0] / cli_eval[0] - 1.0, "overhead_median": py[1] / cli_eval[1] - 1.0,
        "threads": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count())),
    }


def bench_interrupt(cli, tmp, runs):
    import kvscope
    path = os.path.join(tmp, "long.h5")
    run(cli, "synth", path, "--quiet", "--layers", 8, "--tokens", 8192, "--heads", 32, "--kv-heads", 8,
        "--head-dim", 128, "--queries", 64, "--seed", 2)
    dump = kvscope.open(path)
    latencies = []
    for i in range(runs):
        sent = []

        def fire():
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Timer(0.5 + 0.1 * i, fire)
        timer.start()
        try:
            dump.eval(key=SPEC, value=SPEC)
            timer.cancel()
            latencies.append(None)  # finished before the signal
        except KeyboardInterrupt:
            latencies.append(time.perf_counter() - sent[0])
    done = [x for x in latencies if x is not None]
    return {"shape": "L=8 T=8192 H=32 KVH=8 D=128 Tq=64", "latencies_s": latencies,
            "max_s": max(done) if done else None}


def corpus(cli, tmp, large):
    paths = []
    for i in range(6):
        p = os.path.join(tmp, "%s%d.h5" % ("L" if large else "c", i))
        if large:
            run(cli, "synth", p, "--quiet", "--layers", 4, "--tokens", 2048, "--heads", 32, "--kv-heads", 8,
                "--head-dim", 128, "--queries", 64, "--seed", 20 + i)
        else:  # the tests' corpus (tests/python/kvscope/conftest.py)
            run(cli, "synth", p, "--quiet", "--layers", 2, "--kv-heads", 2, "--heads", 4, "--tokens", 128 + 32 * i,
                "--queries", 16, "--head-dim", 64, "--seed", 10 + i)
        paths.append(p)
    return paths


def bench_sweep(cli, tmp, runs, workers):
    import kvscope
    from dask.distributed import Client, LocalCluster
    out = {}
    for name, large in (("tests corpus (6 dumps, L=2, T=128-288, KVH=2, D=64)", False),
                        ("larger corpus (6 dumps, L=4, T=2048, H=32, KVH=8, D=128)", True)):
        paths = corpus(cli, tmp, large)
        rows = {}
        for n in workers:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   env={"OMP_NUM_THREADS": "1"})
            client = Client(cluster)
            try:
                kvscope.sweep(paths, SETTINGS, client)  # warm-up: imports and first opens on every worker
                best, median = timed(lambda: kvscope.sweep(paths, SETTINGS, client), runs)
            finally:
                client.close()
                cluster.close()
            rows[n] = {"best_s": best, "median_s": median, "pairs_per_s": 18 / best}
        base = rows[workers[0]]["pairs_per_s"]
        for n in workers:
            rows[n]["speedup"] = rows[n]["pairs_per_s"] / base
        out[name] = rows
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(REPO, "build", "release", "app", "kvscope-cli"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--only", default="eval,interrupt,sweep")
    parser.add_argument("--temp-dir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("KVSCOPE_CLI", args.cli)
    only = args.only.split(",")
    tmp = tempfile.mkdtemp(prefix="kvscope-pybench-", dir=args.temp_dir)
    figures = {"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}}
    try:
        if "eval" in only:
            figures["eval"] = e = bench_eval(args.cli, tmp, args.runs)
            print("eval (%s): CLI in-process %.3f s (best; median %.3f), Python %.3f s (median %.3f): "
                  "overhead %+.1f %% best, %+.1f %% median; open from Python %.4f s"
                  % (e["shape"], e["cli_in_process_s"][0], e["cli_in_process_s"][1], e["python_eval_s"][0],
                     e["python_eval_s"][1], 100 * e["overhead_best"], 100 * e["overhead_median"],
                     e["python_open_s"][0]))
        if "interrupt" in only:
            figures["interrupt"] = i = bench_interrupt(args.cli, tmp, args.runs)
            print("Ctrl-C during eval (%s): %s" % (i["shape"], ", ".join(
                "finished first" if x is None else "%.0f ms" % (1000 * x) for x in i["latencies_s"])))
        if "sweep" in only:
            workers = [int(w) for w in args.workers.split(",")]
            figures["sweep"] = s = bench_sweep(args.cli, tmp, max(1, min(args.runs, 3)), workers)
            for name, rows in s.items():
                print("sweep, %s, 18 pairs:" % name)
                for n, r in rows.items():
                    print("  %2d worker%s: %.2f s best (median %.2f), %.1f pairs/s, %.2f×" % (
                        n, "" if n == 1 else "s", r["best_s"], r["median_s"], r["pairs_per_s"], r["speedup"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["machine"]["load_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
