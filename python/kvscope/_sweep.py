# SPDX-License-Identifier: GPL-3.0-or-later
"""Corpus sweeps on Dask: every (dump, setting) eval as a task, results streamed to a CSV file.

A row is one (dump, setting): the setting's resolved K and V plans, their bits and bytes per token,
and eval's summary (the names of `kvscope-cli eval --csv`'s columns). Workers open dumps by path;
the scheduler reruns the tasks of a worker that dies. Each finished row is appended to `out` at
once, so a killed sweep keeps what it finished and resume=True computes only the rest.
"""

import builtins
import collections
import csv
import io
import math
import os
import threading
import time

SETTING_KEYS = ("key", "value", "preset", "engine")
TENSOR_METRICS = ("mse", "rel_error", "sqnr_db", "max_abs_error")
ATTENTION_METRICS = ("score_mae", "score_max", "kl_mean", "kl_max", "top1_agreement", "output_rel_error")
CASES = ("key_only", "value_only", "joint")
METRICS = tuple("%s_%s" % (s, m) for s in ("key", "value") for m in TENSOR_METRICS) + tuple(
    "%s_%s" % (c, m) for c in CASES for m in ATTENTION_METRICS)
COLUMNS = ("dump", "setting", "model", "layers", "kv_heads", "tokens", "head_dim", "key_spec", "value_spec",
           "key_bits_per_element", "value_bits_per_element", "bytes_per_token_baseline",
           "bytes_per_token_quantized", "entries") + METRICS
TEXT_COLUMNS = ("dump", "setting", "model", "key_spec", "value_spec")
INT_COLUMNS = ("layers", "kv_heads", "tokens", "head_dim", "entries")
AGGREGATED = ("key_bits_per_element", "value_bits_per_element", "bytes_per_token_quantized") + METRICS

SweepResult = collections.namedtuple("SweepResult", "frame aggregates computed resumed")
SweepResult.__doc__ = """sweep()'s result.

frame: one row per (dump, setting), in the order given (COLUMNS). aggregates: one row per setting
with n_dumps and, for each metric and for bits and bytes per token, its mean, p95 (linear
interpolation) and max over the corpus. computed: the (dump, setting) pairs this call evaluated;
resumed: the pairs read back from `out`."""


# ---- settings ------------------------------------------------------------------------------------

def normalize_setting(setting):
    """A setting as a dict with one way (key+value, preset or engine) and its label.

    Accepts a preset name ("kivi-2"), a (key, value) pair, or a dict with key/value, preset or
    engine (and optionally label)."""
    if isinstance(setting, str):
        d = {"preset": setting}
    elif isinstance(setting, (tuple, list)) and len(setting) == 2:
        d = {"key": setting[0], "value": setting[1]}
    elif isinstance(setting, dict):
        unknown = set(setting) - set(SETTING_KEYS) - {"label"}
        if unknown:
            raise ValueError("setting %r: unknown field(s) %s; allowed: key and value, preset, engine, label"
                             % (setting, ", ".join(sorted(unknown))))
        d = dict(setting)
    else:
        raise TypeError("setting %r: expected a preset name, a (key, value) pair or a dict" % (setting,))
    if "label" not in d:
        if d.get("preset"):
            d["label"] = d["preset"]
        elif d.get("engine"):
            d["label"] = d["engine"]
        else:
            # As `kvscope-cli e2e --sweep` labels a pair (plans have no spaces).
            d["label"] = "%s : %s" % (d.get("key", ""), d.get("value", ""))
    return d


# ---- the task ------------------------------------------------------------------------------------

_open_dumps = collections.OrderedDict()
_open_lock = threading.Lock()
_OPEN_KEPT = 4


def _cached_dump(path, mapping):
    """A worker keeps its last few dumps open (each has a reader process): a dump's settings
    often run on the same worker one after another."""
    import kvscope
    key = (path, repr(mapping))
    with _open_lock:
        dump = _open_dumps.pop(key, None)
        if dump is None:
            dump = kvscope.open(path, mapping)
        _open_dumps[key] = dump
        while len(_open_dumps) > _OPEN_KEPT:
            _open_dumps.popitem(last=False)
    return dump


def row_from_report(path, label, report):
    """The sweep's row of one eval report (a dict as `eval --json` prints it)."""
    s = report["summary"]
    row = {
        "dump": path,
        "setting": label,
        "model": report["dump"]["model"],
        "layers": report["dump"]["layers"],
        "kv_heads": report["dump"]["kv_heads"],
        "tokens": report["dump"]["tokens"],
        "head_dim": report["dump"]["head_dim"],
        "key_spec": report["key"]["spec"],
        "value_spec": report["value"]["spec"],
        "key_bits_per_element": report["key"]["bits_per_element"],
        "value_bits_per_element": report["value"]["bits_per_element"],
        "bytes_per_token_baseline": report["bytes_per_token"]["baseline_fp16"],
        "bytes_per_token_quantized": report["bytes_per_token"]["quantized"],
        "entries": s["entries"],
    }
    for side in ("key", "value"):
        for m in TENSOR_METRICS:
            row["%s_%s" % (side, m)] = s[side][m]
    attention = s["attention"]
    for c in CASES:
        for m in ATTENTION_METRICS:
            row["%s_%s" % (c, m)] = attention[c][m] if attention else None
    return row


def evaluate_pair(path, setting, options):
    """One task: eval `path` under `setting` (normalize_setting's dict) and return its row."""
    kwargs = {k: setting[k] for k in SETTING_KEYS if setting.get(k) is not None}
    for name in ("layers", "sequence", "queries", "nonfinite"):
        if name in options:
            kwargs[name] = options[name]
    try:
        report = _cached_dump(path, options.get("mapping")).eval(**kwargs)
    except (ValueError, OSError, MemoryError) as exc:
        raise type(exc)("%s (%s): %s" % (path, setting["label"], exc)) from None
    return row_from_report(path, setting["label"], report)


def evaluate_dump(path, settings, options):
    """One task of per_task="dump": every setting on one dump, in one worker (the dump's data is
    read from the file system once, then from that node's page cache)."""
    return [evaluate_pair(path, s, options) for s in settings]


# ---- the result file -----------------------------------------------------------------------------

def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def _parse(column, text):
    if column in TEXT_COLUMNS:
        return text
    if text == "":
        return None
    return int(text) if column in INT_COLUMNS else float(text)


class ResultFile:
    """The CSV file rows stream into: a header, then one complete line per finished pair, each
    written with one write() and flushed. A partial last line (a sweep killed mid-write) is
    dropped when the file is resumed."""

    def __init__(self, path, resume):
        self.path = os.fspath(path)
        self.rows = []
        if os.path.exists(self.path):
            if not resume:
                raise FileExistsError("%s exists: pass resume=True (--resume) to continue that sweep, or "
                                      "choose another file" % self.path)
            self.rows = self._read_back()
        else:
            with builtins.open(self.path, "w", newline="") as f:
                f.write(self._line(COLUMNS))
        self._file = builtins.open(self.path, "a", newline="")

    @staticmethod
    def _line(values):
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(values)
        return out.getvalue()

    def _read_back(self):
        with builtins.open(self.path, "r", newline="") as f:
            text = f.read()
        complete = text[:text.rfind("\n") + 1]  # a line without its newline was cut short
        lines = complete.splitlines(keepends=True)
        if not lines or next(csv.reader([lines[0]])) != list(COLUMNS):
            raise ValueError("%s: not a kvscope sweep result (its header differs from kvscope's columns); "
                             "choose another file" % self.path)
        rows = []
        for i, fields in enumerate(csv.reader(lines[1:]), start=2):
            if len(fields) != len(COLUMNS):
                raise ValueError("%s: line %d has %d fields, expected %d" % (self.path, i, len(fields), len(COLUMNS)))
            rows.append({c: _parse(c, v) for c, v in zip(COLUMNS, fields)})
        if len(complete) != len(text):
            with builtins.open(self.path, "r+", newline="") as f:
                f.truncate(len(complete.encode("utf-8")))
        return rows

    def append(self, row):
        self._file.write(self._line([_cell(row[c]) for c in COLUMNS]))
        self._file.flush()

    def close(self):
        self._file.close()


def write_h5(frame, aggregates, path):
    """The frame and the aggregates as an HDF5 file (one dataset per column under /results and
    /aggregates), written to a temporary file and renamed into place."""
    import h5py
    import numpy as np
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["kvscope_sweep"] = 1
            for name, table in (("results", frame), ("aggregates", aggregates.reset_index())):
                g = f.create_group(name)
                for column in table.columns:
                    values = table[column]
                    if values.dtype == object:
                        data = np.array([_cell(v) for v in values], dtype=h5py.string_dtype())
                    else:
                        data = values.to_numpy(dtype=float if values.dtype.kind == "f" else values.dtype)
                    g.create_dataset(str(column), data=data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ---- frames --------------------------------------------------------------------------------------

def frame_of(rows, dumps, labels):
    import pandas as pd
    order = {(d, l): (i, j) for i, d in enumerate(dumps) for j, l in enumerate(labels)}
    rows = sorted(rows, key=lambda r: order.get((r["dump"], r["setting"]), (len(dumps), len(labels))))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS:
        if c not in TEXT_COLUMNS and c not in INT_COLUMNS:
            frame[c] = frame[c].astype(float)
    return frame


def aggregates_of(frame, labels):
    """Per setting: n_dumps, and the mean, p95 and max of each metric and size over the corpus."""
    import pandas as pd
    out = []
    for label in labels:
        part = frame[frame["setting"] == label]
        row = {"setting": label, "n_dumps": len(part)}
        for c in AGGREGATED:
            values = part[c].dropna()
            row[c + "_mean"] = values.mean() if len(values) else math.nan
            row[c + "_p95"] = values.quantile(0.95) if len(values) else math.nan
            row[c + "_max"] = values.max() if len(values) else math.nan
        out.append(row)
    return pd.DataFrame(out).set_index("setting")


# ---- the sweep -----------------------------------------------------------------------------------

def local_cluster(workers=None, threads=None):
    """A LocalCluster of `workers` processes (default: one per core), one task at a time each,
    and `threads` OpenMP threads per worker (default: the cores divided among the workers)."""
    from dask.distributed import LocalCluster
    cores = os.cpu_count() or 1
    workers = workers or cores
    threads = threads or max(1, cores // workers)
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        env={"OMP_NUM_THREADS": str(threads)})


def sweep(dumps, settings, client=None, *, out=None, h5=None, resume=False, layers=None, queries="all", sequence=0,
          nonfinite="refuse", mapping=None, retries=0, progress=None, workers=None, per_task="pair"):
    """Evaluates every (dump, setting) pair as a Dask task and returns SweepResult(frame, aggregates,
    computed, resumed).

    dumps: paths as the workers see them. settings: preset names, (key, value) pairs or dicts
    (key/value, preset or engine, optional label). client: a dask.distributed Client; None starts
    a LocalCluster with one worker per core (`workers` to choose) for this call. out: a CSV file the
    rows are appended to as they finish (it must not exist unless resume=True, which skips the pairs
    it holds); h5: also write the frame and aggregates as HDF5 at the end. layers, queries, sequence,
    nonfinite, mapping: eval's options for every pair. retries: reruns of a task that raised (a
    task whose worker died is rerun by the scheduler anyway). progress(done, total, row) is called
    as rows arrive; returning False stops the sweep (the file keeps the finished rows). per_task:
    "pair" (default: one task per pair, the finest balance) or "dump" (one task per dump running
    its missing settings, so each dump is read from shared storage once; rows then arrive a dump
    at a time).
    """
    if isinstance(dumps, (str, os.PathLike)):
        dumps = [dumps]
    dumps = [os.fspath(d) for d in dumps]
    normalized = [normalize_setting(s) for s in settings]
    labels = [s["label"] for s in normalized]
    if len(set(labels)) != len(labels):
        raise ValueError("two settings have the same label; give each a distinct 'label'")
    if len(set(dumps)) != len(dumps):
        raise ValueError("a dump is listed twice")
    if not dumps or not normalized:
        raise ValueError("give at least one dump and one setting")
    if per_task not in ("pair", "dump"):
        raise ValueError("per_task '%s': allowed: pair, dump" % per_task)
    options = {"queries": queries, "sequence": sequence, "nonfinite": nonfinite}
    if layers is not None:
        options["layers"] = layers
    if mapping is not None:
        options["mapping"] = mapping

    results = ResultFile(out, resume) if out is not None else None
    rows = list(results.rows) if results else []
    wanted = {(d, l) for d in dumps for l in labels}
    rows = [r for r in rows if (r["dump"], r["setting"]) in wanted]
    done = {(r["dump"], r["setting"]) for r in rows}
    resumed = sorted(done)
    todo = [(d, s) for d in dumps for s in normalized if (d, s["label"]) not in done]

    own_cluster = None
    computed = []
    try:
        if todo:
            from dask.distributed import Client, as_completed
            if client is None:
                own_cluster = local_cluster(workers)
                client = Client(own_cluster)
            futures = {}
            if per_task == "pair":
                for d, s in todo:
                    futures[client.submit(evaluate_pair, d, s, options, pure=False, retries=retries)] = d
            else:
                by_dump = collections.OrderedDict()
                for d, s in todo:
                    by_dump.setdefault(d, []).append(s)
                for d, group in by_dump.items():
                    futures[client.submit(evaluate_dump, d, group, options, pure=False, retries=retries)] = d
            total = len(wanted)
            try:
                for future in as_completed(futures):
                    got = future.result()
                    for row in (got if per_task == "dump" else [got]):
                        if results:
                            results.append(row)
                        rows.append(row)
                        computed.append((row["dump"], row["setting"]))
                    if progress is not None and progress(len(rows), total, row) is False:
                        from . import Cancelled
                        raise Cancelled("the sweep's progress callback returned False; %s rows are kept"
                                        % ("the finished" if results else "no"))
            finally:
                client.cancel([f for f in futures if not f.done()])
    finally:
        if results:
            results.close()
        if own_cluster is not None:
            client.close()
            own_cluster.close()

    frame = frame_of(rows, dumps, labels)
    aggregates = aggregates_of(frame, labels)
    if h5 is not None:
        write_h5(frame, aggregates, os.fspath(h5))
    return SweepResult(frame, aggregates, computed, resumed)


# ---- python3 -m kvscope.sweep --------------------------------------------------------------------

def main(argv=None):
    import argparse
    import sys
    from . import Cancelled
    parser = argparse.ArgumentParser(
        prog="python3 -m kvscope.sweep",
        description="Evaluate every dump under every setting on a Dask cluster; rows stream to --out.")
    parser.add_argument("dumps", nargs="+", help="dump files as the workers see them")
    parser.add_argument("--preset", action="append", default=[], help="a preset (repeatable)")
    parser.add_argument("--engine", action="append", default=[], help='an engine string, e.g. "vllm --kv-cache-dtype fp8" (repeatable)')
    parser.add_argument("--kv", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                        help="a key spec or plan and a value spec or plan (repeatable)")
    parser.add_argument("--out", required=True, help="the CSV file rows are appended to")
    parser.add_argument("--h5", help="also write the results and aggregates as HDF5 here")
    parser.add_argument("--resume", action="store_true", help="continue the sweep in --out, skipping its rows")
    parser.add_argument("--scheduler", help="a Dask scheduler address (tcp://host:8786); default: a LocalCluster")
    parser.add_argument("--workers", type=int, help="LocalCluster workers (default: one per core)")
    parser.add_argument("--layers", help="eval's --layers for every pair")
    parser.add_argument("--queries", default="all", help="eval's --queries (all or last:N)")
    parser.add_argument("--sequence", type=int, default=0, help="eval's --sequence")
    parser.add_argument("--nonfinite", default="refuse", help="eval's --nonfinite (refuse or skip-heads)")
    parser.add_argument("--per-task", default="pair", choices=("pair", "dump"),
                        help="one task per (dump, setting) pair (default) or per dump (each dump read once)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on standard error")
    args = parser.parse_args(argv)
    settings = list(args.preset) + [{"engine": e} for e in args.engine] + [tuple(kv) for kv in args.kv]
    if not settings:
        parser.error("give at least one --preset, --engine or --kv KEY VALUE")
    client = None
    started = time.monotonic()

    def report(done, total, row):
        if not args.quiet:
            sys.stderr.write("\rkvscope.sweep: %d/%d done (%.0f s)" % (done, total, time.monotonic() - started))
            sys.stderr.flush()

    try:
        if args.scheduler:
            from dask.distributed import Client
            client = Client(args.scheduler)
        result = sweep(args.dumps, settings, client, out=args.out, h5=args.h5, resume=args.resume,
                       layers=args.layers, queries=args.queries, sequence=args.sequence, nonfinite=args.nonfinite,
                       progress=report, workers=args.workers, per_task=args.per_task)
    except (KeyboardInterrupt, Cancelled):
        sys.stderr.write("\nkvscope.sweep: interrupted; %s keeps the finished rows (continue with --resume)\n"
                         % args.out)
        return 130
    except (ValueError, OSError, TypeError) as exc:
        sys.stderr.write("\nkvscope.sweep: %s\n" % exc)
        return 2
    finally:
        if client is not None:
            client.close()
    if not args.quiet:
        sys.stderr.write("\n")
    import pandas as pd
    columns = ["n_dumps", "bytes_per_token_quantized_mean", "key_only_kl_mean_mean", "joint_kl_mean_mean",
               "joint_kl_mean_p95", "joint_output_rel_error_mean", "joint_top1_agreement_mean"]
    columns = [c for c in columns if c in result.aggregates.columns]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(result.aggregates[columns].to_string())
    print("%d rows in %s (%d computed now, %d resumed)" % (len(result.frame), args.out, len(result.computed),
                                                           len(result.resumed)))
    return 0
