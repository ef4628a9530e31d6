# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared fixtures of the kvscope package's tests (tests/python/CMakeLists.txt runs them with pytest).

Expectations come from kvscope-cli run as a separate program (its `read`, `eval --json`, `info
--json`, … output and its error messages), from numpy references, and from invariants; the dumps
are written by `kvscope-cli synth`.
"""
import json
import os
import subprocess

import pytest

CLI = os.environ.get("KVSCOPE_CLI", "")
SHARED = os.environ.get("KVSCOPE_SHARED_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared"))


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: starts Dask worker processes (left out of the ASan stage)")


def cli(*args, check=True):
    """Runs kvscope-cli; returns the CompletedProcess (check: exit 0 or the test fails with stderr)."""
    assert CLI and os.access(CLI, os.X_OK), "KVSCOPE_CLI must name kvscope-cli (tests/python/CMakeLists.txt sets it)"
    r = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, "kvscope-cli %s: exit %d: %s" % (" ".join(map(str, args)), r.returncode, r.stderr)
    return r


def cli_json(*args):
    return json.loads(cli(*args).stdout)


def cli_error(*args):
    """The message kvscope-cli prints for bad input (exit 2), without its 'kvscope-cli: ' prefix."""
    r = cli(*args, check=False)
    assert r.returncode == 2, "expected exit 2, got %d: %s" % (r.returncode, r.stderr)
    first = r.stderr.splitlines()[0]
    assert first.startswith("kvscope-cli: "), r.stderr
    return first[len("kvscope-cli: "):]


def synth(path, **options):
    args = ["synth", path, "--quiet"]
    for k, v in options.items():
        args += ["--" + k.replace("_", "-"), v]
    cli(*args)
    return str(path)


@pytest.fixture(scope="session")
def dumps(tmp_path_factory):
    """Three small dumps of different shapes and character: the sample's shape (fp16, half RoPE),
    an fp32 interleaved-RoPE one with head dim 128 and grouped queries, and a massive-sinks one
    with two sequences."""
    d = tmp_path_factory.mktemp("dumps")
    return {
        "llama": synth(d / "llama.h5", layers=3, tokens=96, queries=16, seed=3),
        "fp32": synth(d / "fp32.h5", layers=2, kv_heads=2, heads=8, tokens=80, queries=8, head_dim=128,
                      dtype="fp32", rope_style="interleaved", rope_theta=500000, profile="bias-outlier", seed=5),
        "sinks": synth(d / "sinks.h5", layers=2, kv_heads=1, heads=4, tokens=64, queries=12, head_dim=32,
                       sequences=2, profile="massive-sinks", seed=7),
    }


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """The sweep's corpus: six synthetic dumps, seeds and lengths differing."""
    d = tmp_path_factory.mktemp("corpus")
    return [synth(d / ("c%d.h5" % i), layers=2, kv_heads=2, heads=4, tokens=128 + 32 * i, queries=16,
                  head_dim=64, seed=10 + i) for i in range(6)]


@pytest.fixture(scope="session")
def cluster():
    """One LocalCluster of 2 worker processes for the whole session (starting one takes seconds)."""
    from dask.distributed import Client, LocalCluster
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                     env={"OMP_NUM_THREADS": "1"})
    client = Client(c)
    yield client
    client.close()
    c.close()


@pytest.fixture(scope="session")
def stories():
    path = os.path.join(SHARED, "models", "stories260K.bin")
    if not os.path.exists(path):
        pytest.skip("../shared/models/stories260K.bin is absent: the record/e2e tests need it")
    return os.path.abspath(path)
