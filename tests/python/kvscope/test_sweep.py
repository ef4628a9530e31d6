# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope.sweep on a LocalCluster of 2 worker processes: the frame equals the CLI's per-dump eval
JSON, a worker killed mid-sweep changes nothing, and an interrupted sweep resumes without losing
or repeating a pair. One cluster serves the session (conftest.cluster)."""
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import kvscope
from kvscope import _sweep
from conftest import cli_json

pytestmark = pytest.mark.cluster

SETTINGS = ["kivi-2", "llamacpp-q4_0", ("int4,axis=channel,group=32", "int8")]
FLAGS = {"kivi-2": ["--preset", "kivi-2"], "llamacpp-q4_0": ["--preset", "llamacpp-q4_0"],
         "int4,axis=channel,group=32 : int8": ["--key", "int4,axis=channel,group=32", "--value", "int8"]}


@pytest.fixture(scope="module")
def expected(corpus):
    """The frame built from `kvscope-cli eval --json` of every pair, run one by one."""
    rows = [_sweep.row_from_report(d, label, cli_json("eval", d, *flags, "--json", "-"))
            for d in corpus for label, flags in FLAGS.items()]
    return _sweep.frame_of(rows, corpus, list(FLAGS))


def assert_same_frame(frame, expected):
    assert list(frame.columns) == list(_sweep.COLUMNS)
    pd.testing.assert_frame_equal(frame.reset_index(drop=True), expected.reset_index(drop=True), check_exact=True)


def test_the_frame_equals_the_cli_json_of_every_pair(cluster, corpus, expected, tmp_path):
    out = tmp_path / "r.csv"
    h5 = tmp_path / "r.h5"
    result = kvscope.sweep(corpus, SETTINGS, cluster, out=out, h5=h5)
    assert_same_frame(result.frame, expected)
    assert len(result.computed) == 18 and result.resumed == []
    # The CSV holds the same rows (floats written in round-trip form).
    back = _sweep.ResultFile(out, resume=True)
    back.close()
    assert_same_frame(_sweep.frame_of(back.rows, corpus, list(FLAGS)), expected)
    # Aggregates: per setting over the 6 dumps.
    agg = result.aggregates
    assert list(agg.index) == list(FLAGS) and (agg["n_dumps"] == 6).all()
    part = expected[expected.setting == "kivi-2"]["joint_kl_mean"]
    assert agg.loc["kivi-2", "joint_kl_mean_mean"] == part.mean()
    assert agg.loc["kivi-2", "joint_kl_mean_max"] == part.max()
    assert agg.loc["kivi-2", "joint_kl_mean_p95"] == part.quantile(0.95)
    h5py = pytest.importorskip("h5py")
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(f["results/joint_kl_mean"][()], expected["joint_kl_mean"].to_numpy())
        assert [s.decode() for s in f["results/setting"][()]] == list(expected["setting"])


def test_a_worker_killed_mid_sweep_changes_nothing(cluster, corpus, expected):
    killed = []

    def kill_a_busy_worker(done, total, row):
        if killed:
            return
        for address, keys in cluster.processing().items():
            if keys:
                pid = cluster.run(os.getpid, workers=[address])[address]
                os.kill(pid, signal.SIGKILL)
                killed.append((address, len(keys)))
                return

    result = kvscope.sweep(corpus, SETTINGS, cluster, progress=kill_a_busy_worker)
    assert killed, "no worker was busy after the first row: the sweep finished too fast to test this"
    assert_same_frame(result.frame, expected)
    assert sorted(result.computed) == sorted((d, l) for d in corpus for l in FLAGS)
    cluster.wait_for_workers(2)


def test_interrupt_then_resume_loses_and_repeats_nothing(cluster, corpus, expected, tmp_path):
    out = tmp_path / "r.csv"

    def interrupt_after_five(done, total, row):
        if done == 5:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        kvscope.sweep(corpus, SETTINGS, cluster, out=out, progress=interrupt_after_five)
    first = _sweep.ResultFile(out, resume=True)
    first.close()
    assert len(first.rows) == 5
    # A kill in the middle of writing a row leaves a partial line: it is not a finished pair.
    with open(out, "a") as f:
        f.write(os.path.basename(corpus[0]) + ",kivi-2,synthetic")
    with pytest.raises(FileExistsError):
        kvscope.sweep(corpus, SETTINGS, cluster, out=out)
    result = kvscope.sweep(corpus, SETTINGS, cluster, out=out, resume=True)
    finished = {(r["dump"], r["setting"]) for r in first.rows}
    assert set(result.resumed) == finished
    assert set(result.computed) == {(d, l) for d in corpus for l in FLAGS} - finished
    assert len(result.computed) == 13
    assert_same_frame(result.frame, expected)
    with open(out) as f:
        assert len(f.read().splitlines()) == 1 + 18


def test_one_task_per_dump_gives_the_same_frame(cluster, corpus, expected, tmp_path):
    out = tmp_path / "d.csv"
    first = kvscope.sweep(corpus[:2], SETTINGS, cluster, out=out, per_task="dump")
    assert len(first.computed) == 6
    result = kvscope.sweep(corpus, SETTINGS, cluster, out=out, resume=True, per_task="dump")
    assert len(result.computed) == 12 and len(result.resumed) == 6
    assert_same_frame(result.frame, expected)


def test_bad_input_names_the_pair(cluster, corpus, tmp_path):
    missing = str(tmp_path / "missing.h5")
    with pytest.raises(OSError, match="(?i)missing.h5 \\(kivi-2\\): .*missing.h5: cannot open: no such file"):
        kvscope.sweep([missing], ["kivi-2"], cluster)
    with pytest.raises(ValueError, match="no-such-preset"):
        kvscope.sweep(corpus[:1], ["no-such-preset"], cluster)
    with pytest.raises(ValueError, match="same label"):
        kvscope.sweep(corpus, ["kivi-2", {"preset": "kivi-2"}], cluster)


def test_the_shell_command_writes_the_same_rows(cluster, corpus, expected, tmp_path):
    out = tmp_path / "shell.csv"
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "kvscope.sweep", *corpus, "--preset", "kivi-2", "--preset", "llamacpp-q4_0",
           "--kv", "int4,axis=channel,group=32", "int8", "--scheduler", cluster.scheduler.address,
           "--out", str(out), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "18 rows in" in r.stdout and "kivi-2" in r.stdout
    back = _sweep.ResultFile(out, resume=True)
    back.close()
    assert_same_frame(_sweep.frame_of(back.rows, corpus, list(FLAGS)), expected)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)  # out exists, no --resume
    assert r.returncode == 2 and "pass resume=True (--resume)" in r.stderr
    r = subprocess.run(cmd[:4] + ["--out", str(tmp_path / "x.csv")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "give at least one --preset" in r.stderr
