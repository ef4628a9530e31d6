#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Times a plain PyTorch (CPU) version of kvscope's quantize and attention work and compares it
with `kvscope-cli bench --json` on the same machine, shapes and thread count.

The PyTorch code is written the way a researcher's notebook does it: int4 asymmetric
quantization with per-token groups of 128 channels (fp16 scale and min, as quantization.md §2),
and the three attention cases of §6 (key_only, value_only, joint) with their six metrics, all
with whole-tensor operations.

    /usr/bin/python3 tests/perf/torch_compare.py [--workload kernels|eval] [--cli PATH]
                     [--cli-command "CMD"] [--kvscope-json FILE] [--threads 2] [--quick]

--workload kernels (default): section 1's int4 g128 round trip and section 2's attention, against
`kvscope-cli bench --only quantize,attention --json`. Target: ≥ 3×.
--workload eval: issue 30's eval workload (4 layers, H 32, Tq 64, KVH 8, T 4096, D 128, int4 g128 on
K and V, the tensor metrics of §7 and the attention metrics of §6 per kv head) against
`kvscope-cli eval` of a `kvscope-cli synth` dump of that shape (fp16), reading included; the
PyTorch peer gets its tensors in memory (fp16-rounded) and is timed without reading. Target: ≥ 10×.

Prints one line per workload with both times and the ratio torch/kvscope, the torch version
and both thread counts. Without torch it prints why and exits 0.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:  # the comparison needs torch; nothing else in the suite does
    print("torch_compare: skipped: PyTorch is not installed for", sys.executable,
          "(Debian: apt-get install python3-torch)")
    sys.exit(0)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = 3.0
EVAL_TARGET = 10.0  # issue 30: against a current PyTorch on the same cores


def quantize_int4_group(x, group=128):
    """int4 asym round trip, groups of `group` consecutive channels of one token."""
    g = x.reshape(-1, group)
    lo = g.amin(dim=1, keepdim=True)
    hi = g.amax(dim=1, keepdim=True)
    scale = ((hi - lo) / 15).half().float()
    zero = lo.half().float()
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.clamp(torch.round((g - zero) / safe), 0, 15)
    xhat = torch.where(scale == 0, zero.expand_as(g), q * scale + zero)
    return xhat.reshape(x.shape)


def attention_metrics(q, k, v, khat, vhat):
    """The six §6 metrics per kv head for key_only, value_only and joint."""
    heads, tq, d = q.shape
    kvh, t, _ = k.shape
    group = heads // kvh
    scale = 1.0 / d ** 0.5
    rep = lambda x: x.repeat_interleave(group, dim=0)  # noqa: E731  [H, T, D]
    pos = torch.arange(t - tq, t).unsqueeze(1)
    visible = torch.arange(t).unsqueeze(0) <= pos  # [Tq, T]
    s = (q @ rep(k).transpose(1, 2)) * scale
    shat = (q @ rep(khat).transpose(1, 2)) * scale
    s = s.masked_fill(~visible, float("-inf"))
    shat = shat.masked_fill(~visible, float("-inf"))
    logp = torch.log_softmax(s, dim=-1)
    logphat = torch.log_softmax(shat, dim=-1)
    p, phat = logp.exp(), logphat.exp()
    o = p @ rep(v)
    outputs = {"key_only": phat @ rep(v), "value_only": p @ rep(vhat), "joint": phat @ rep(vhat)}

    diff = (shat - s).abs().masked_fill(~visible, 0).reshape(kvh, group, tq, t)
    count = visible.sum() * group
    kl = (p * (logp - logphat)).masked_fill(~visible, 0).sum(-1).reshape(kvh, -1)
    top1 = (s.argmax(-1) == shat.argmax(-1)).float().reshape(kvh, -1)
    norm = o.norm(dim=-1)
    result = {}
    for name, ohat in outputs.items():
        rel = ((ohat - o).norm(dim=-1) / norm).reshape(kvh, -1).mean(1)
        keys_changed = name != "value_only"
        result[name] = {
            "score_mae": diff.sum((1, 2, 3)) / count if keys_changed else torch.zeros(kvh),
            "score_max": diff.amax((1, 2, 3)) if keys_changed else torch.zeros(kvh),
            "kl_mean": kl.mean(1) if keys_changed else torch.zeros(kvh),
            "kl_max": kl.amax(1) if keys_changed else torch.zeros(kvh),
            "top1_agreement": top1.mean(1) if keys_changed else torch.ones(kvh),
            "output_rel_error": rel,
        }
    return result


def tensor_metrics(x, xhat):
    """§7 per kv head: mse, rel_error, sqnr_db, max_abs_error (float64 sums)."""
    e = (xhat - x).double()
    s = x.double()
    err = (e * e).sum((1, 2))
    sig = (s * s).sum((1, 2))
    return {"mse": err / (x.shape[1] * x.shape[2]), "rel_error": (err / sig).sqrt(),
            "sqnr_db": 10 * torch.log10(sig / err), "max_abs_error": e.abs().amax((1, 2))}


def eval_peer(layers):
    """The eval workload: per layer, K and V quantized, their tensor metrics, the attention metrics."""
    out = []
    for q, k, v in layers:
        khat, vhat = quantize_int4_group(k), quantize_int4_group(v)
        out.append((tensor_metrics(k, khat), tensor_metrics(v, vhat), attention_metrics(q, k, v, khat, vhat)))
    return out


def run_eval(args):
    """kvscope-cli eval against the PyTorch peer on the eval workload."""
    layers, heads, kvh, tokens, tq, dim = (2, 32, 8, 512, 16, 128) if args.quick else (4, 32, 8, 4096, 64, 128)
    cli = args.cli_command.split() if args.cli_command else [args.cli or os.path.join(REPO, "build", "release", "app", "kvscope-cli")]
    tmp = tempfile.mkdtemp(prefix="kvscope-torch-eval-", dir=args.temp_dir)
    try:
        dump = os.path.join(tmp, "eval.h5")
        subprocess.run(cli + ["synth", dump, "--layers", str(layers), "--kv-heads", str(kvh), "--heads", str(heads),
                              "--tokens", str(tokens), "--queries", str(tq), "--head-dim", str(dim), "-q"], check=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        cmd = cli + ["eval", dump, "--key", "int4,group=128", "--value", "int4,group=128", "--json", os.path.join(tmp, "r.json")]
        t_kv = best_of(lambda: subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL), args.runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    torch.manual_seed(0)
    data = [(torch.randn(heads, tq, dim).half().float(), torch.randn(kvh, tokens, dim).half().float(),
             torch.randn(kvh, tokens, dim).half().float()) for _ in range(layers)]
    with torch.no_grad():
        t_torch = best_of(lambda: eval_peer(data), args.runs)
    ratio = t_torch / t_kv
    shape = f"L={layers} H={heads} Tq={tq} KVH={kvh} T={tokens} D={dim}"
    verdict = "pass" if ratio >= EVAL_TARGET else "FAIL"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; kvscope-cli eval, OMP_NUM_THREADS={args.threads}"
          f"{' (quick shapes)' if args.quick else ''}")
    print(f"{'workload':26}{'shape':40}{'torch s':>10}{'kvscope s':>11}{'ratio':>8}  target ≥ {EVAL_TARGET:g}×")
    print(f"{'eval, int4 g128 K and V':26}{shape:40}{t_torch:10.4f}{t_kv:11.4f}{ratio:7.2f}×  {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "workload": "eval", "shape": shape,
                       "torch_seconds": t_torch, "kvscope_seconds": t_kv, "ratio": ratio, "target": EVAL_TARGET,
                       "verdict": verdict}, f, indent=2)


def best_of(fn, runs):
    fn()  # warm-up: first-touch allocations and thread pool start
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def kvscope_figures(args):
    if args.kvscope_json:
        with open(args.kvscope_json) as f:
            return json.load(f)
    cli = args.cli or os.path.join(REPO, "build", "perf", "app", "kvscope-cli")
    if not os.path.exists(cli):
        sys.exit(f"torch_compare: {cli} does not exist: build kvscope-cli or pass --cli")
    cmd = [cli, "bench", "--only", "quantize,attention", "--json", "-"] + (["--quick"] if args.quick else [])
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=["kernels", "eval"], default="kernels")
    parser.add_argument("--cli", help="kvscope-cli to run (default: build/perf/app/kvscope-cli; eval: build/release)")
    parser.add_argument("--cli-command", help="eval: the command that runs kvscope-cli, split at spaces (e.g. a loader and its arguments)")
    parser.add_argument("--temp-dir", help="eval: where the dump goes (default: the system's)")
    parser.add_argument("--kvscope-json", help="use these `kvscope-cli bench --json` figures instead of running it")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="the quick shapes of `bench --quick`")
    parser.add_argument("--json", help="write the comparison as JSON to this file")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    if args.workload == "eval":
        run_eval(args)
        return
    torch.manual_seed(0)
    qt = 512 if args.quick else 32768
    at, atq = (1024, 16) if args.quick else (8192, 64)

    k = torch.randn(8, qt, 128)
    t_quant = best_of(lambda: quantize_int4_group(k), args.runs)
    del k

    q = torch.randn(32, atq, 128)
    k, v = torch.randn(8, at, 128), torch.randn(8, at, 128)
    khat = k + 0.05 * k.abs() * torch.randn_like(k)
    vhat = v + 0.05 * v.abs() * torch.randn_like(v)
    with torch.no_grad():
        t_att = best_of(lambda: attention_metrics(q, k, v, khat, vhat), args.runs)

    doc = kvscope_figures(args)
    rows = {(r["group"], r["name"]): r for r in doc["rows"]}
    pairs = [("quantize int4,group=128", ("quantize", "int4,group=128"), t_quant,
              f"KVH=8 T={qt} D=128"),
             ("attention three cases", ("attention", "three cases"), t_att,
              f"H=32 Tq={atq} KVH=8 T={at} D=128")]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; kvscope "
          f"{doc['machine']['threads']} threads{' (quick shapes)' if args.quick else ''}")
    print(f"{'workload':26}{'shape':28}{'torch s':>10}{'kvscope s':>11}{'ratio':>8}  target ≥ {TARGET:g}×")
    report = []
    for label, key, t_torch, shape in pairs:
        row = rows.get(key)
        if row is None or row["verdict"] == "not run":
            why = row["note"] if row else "missing from the kvscope figures"
            print(f"{label:26}{shape:28}{t_torch:10.4f}{'-':>11}{'-':>8}  not run: {why}")
            continue
        ratio = t_torch / row["seconds"]
        verdict = "pass" if ratio >= TARGET else "FAIL"
        print(f"{label:26}{shape:28}{t_torch:10.4f}{row['seconds']:11.4f}{ratio:7.2f}×  {verdict}")
        report.append({"workload": label, "shape": shape, "torch_seconds": t_torch,
                       "kvscope_seconds": row["seconds"], "ratio": ratio, "verdict": verdict})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "rows": report}, f, indent=2)


if __name__ == "__main__":
    main()
