# SPDX-License-Identifier: GPL-3.0-or-later
"""Dump.eval, sensitivity, search and diagnose return what the CLI's --json prints, refuse bad
input with its messages, and stop on Ctrl-C or a progress callback."""
import math
import os
import signal

import numpy as np
import pytest

import kvscope
from conftest import cli_error, cli_json

SETTINGS = [
    ({"preset": "kivi-2"}, ["--preset", "kivi-2"]),
    ({"preset": "llamacpp-q4_0"}, ["--preset", "llamacpp-q4_0"]),
    ({"engine": "vllm --kv-cache-dtype fp8"}, ["--engine", "vllm --kv-cache-dtype fp8"]),
    ({"key": "int4,axis=channel,group=32;last1:int8", "value": "q4_0"},
     ["--key", "int4,axis=channel,group=32;last1:int8", "--value", "q4_0"]),
]


@pytest.mark.parametrize("name", ["llama", "fp32", "sinks"])
def test_eval_equals_cli_eval_json(dumps, name):
    path = dumps[name]
    dump = kvscope.open(path)
    for kwargs, flags in SETTINGS:
        assert dump.eval(**kwargs) == cli_json("eval", path, *flags, "--json", "-"), kwargs
    options = dict(layers=[0, 1], sequence=dump.shape.sequences - 1, queries="last:4", nonfinite="skip-heads")
    flags = ["--layers", "0,1", "--sequence", dump.shape.sequences - 1, "--queries", "last:4", "--nonfinite",
             "skip-heads"]
    assert dump.eval(preset="kivi-4", **options) == cli_json("eval", path, "--preset", "kivi-4", *flags, "--json", "-")


def test_to_frame_has_one_row_per_layer_head_side_metric(dumps):
    report = kvscope.open(dumps["llama"]).eval(preset="kivi-2")
    frame = report.to_frame()
    layers, heads = report["dump"]["layers"], report["dump"]["kv_heads"]
    assert list(frame.columns) == ["layer", "kv_head", "side", "metric", "value"]
    assert len(frame) == layers * heads * (2 * 4 + 3 * 6)
    assert not frame.duplicated(["layer", "kv_head", "side", "metric"]).any()
    h = report["layers"][2]["heads"][1]
    row = frame[(frame.layer == 2) & (frame.kv_head == 1) & (frame.side == "joint") & (frame.metric == "kl_mean")]
    assert row["value"].item() == h["attention"]["joint"]["kl_mean"]
    row = frame[(frame.layer == 0) & (frame.kv_head == 0) & (frame.side == "key") & (frame.metric == "mse")]
    assert row["value"].item() == report["layers"][0]["heads"][0]["key"]["mse"]
    # The summary's means are the frame's means (quantization.md §8).
    mean = frame[(frame.side == "value") & (frame.metric == "rel_error")]["value"].mean()
    assert math.isclose(mean, report["summary"]["value"]["rel_error"], rel_tol=1e-12)


def test_plan_from_a_plan_search_evaluates_like_its_strings(dumps, tmp_path):
    dump = kvscope.open(dumps["llama"])
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("int2,axis=channel,group=32\nq4_0\nq8_0\n")
    found = dump.search(key_budget="kl_mean=0.05", value_budget="output_rel_error=0.2", plan=True,
                        candidates=str(candidates))
    assert found == cli_json("search", dumps["llama"], "--key-budget", "kl_mean=0.05", "--value-budget",
                             "output_rel_error=0.2", "--plan", "--candidates", candidates, "--json", "-")
    assert found["found"]
    assert dump.eval(plan=found) == dump.eval(key=found["key_plan"], value=found["value_plan"])


def test_sensitivity_search_and_diagnose_equal_the_cli_json(dumps):
    path = dumps["llama"]
    dump = kvscope.open(path)
    assert dump.sensitivity("int4;q4_0;int2,axis=channel,group=32", side="key", layers="0-1") == cli_json(
        "sensitivity", path, "--candidates", "int4;q4_0;int2,axis=channel,group=32", "--side", "key", "--layers",
        "0-1", "--json", "-")
    assert dump.sensitivity(["int4", "q8_0"]) == cli_json("sensitivity", path, "--candidates", "int4;q8_0",
                                                          "--json", "-")
    engine = "llama.cpp -ctk q8_0 -ctv q4_0"
    found = dump.search("kl_mean=1e-3", "output_rel_error=0.05", engine=engine)
    assert found == cli_json("search", path, "--key-budget", "kl_mean=1e-3", "--value-budget",
                             "output_rel_error=0.05", "--engine", engine, "--json", "-")
    assert list(found.setting_notes) == dump.resolve(engine=engine)["notes"]
    assert dump.search(value_budget="output_rel_error=0.05", key="q8_0", plan=True, engine="vllm") == cli_json(
        "search", path, "--value-budget", "output_rel_error=0.05", "--key", "q8_0", "--plan", "--engine", "vllm",
        "--json", "-")
    for p in (dumps["llama"], dumps["sinks"]):
        assert kvscope.open(p).diagnose() == cli_json("diagnose", p, "--json", "-")
    assert dump.diagnose(layers="1") == cli_json("diagnose", path, "--layers", "1", "--json", "-")


def test_engine_notes_are_kept_beside_the_report(dumps):
    dump = kvscope.open(dumps["fp32"])
    report = dump.eval(engine="llama.cpp -ctk q4_0 -ctv q4_0")
    assert list(report.setting_notes) == dump.resolve(engine="llama.cpp -ctk q4_0 -ctv q4_0")["notes"]


@pytest.mark.parametrize("kwargs,flags", [
    ({"preset": "kivi-9"}, ["--preset", "kivi-9"]),
    ({"key": "int4"}, ["--key", "int4"]),
    ({"key": "int4", "value": "int4,group=0.5"}, ["--key", "int4", "--value", "int4,group=0.5"]),
    ({"key": "q4_0;last9:q8_0", "value": "q4_0"}, ["--key", "q4_0;last9:q8_0", "--value", "q4_0"]),
    ({"preset": "kivi-2", "engine": "vllm"}, ["--preset", "kivi-2", "--engine", "vllm"]),
    ({"preset": "kivi-2", "layers": "0,7"}, ["--preset", "kivi-2", "--layers", "0,7"]),
    ({"preset": "kivi-2", "layers": []}, ["--preset", "kivi-2", "--layers", ","]),
    ({"preset": "kivi-2", "queries": "last:0"}, ["--preset", "kivi-2", "--queries", "last:0"]),
    ({"preset": "kivi-2", "nonfinite": "ignore"}, ["--preset", "kivi-2", "--nonfinite", "ignore"]),
    ({"preset": "kivi-2", "sequence": 4}, ["--preset", "kivi-2", "--sequence", "4"]),
    ({"engine": "llama.cpp -ctk q3_K"}, ["--engine", "llama.cpp -ctk q3_K"]),
])
def test_eval_errors_are_the_clis(dumps, kwargs, flags):
    path = dumps["llama"]
    with pytest.raises(ValueError) as e:
        kvscope.open(path).eval(**kwargs)
    assert str(e.value) == cli_error("eval", path, *flags, "--json", "-")


def test_other_commands_errors_are_the_clis(dumps):
    path = dumps["llama"]
    dump = kvscope.open(path)
    cases = [
        (lambda: dump.sensitivity(side="keys"), ["sensitivity", path, "--side", "keys"]),
        (lambda: dump.sensitivity("int4;bogus"), ["sensitivity", path, "--candidates", "int4;bogus"]),
        (lambda: dump.search(), ["search", path]),
        (lambda: dump.search("kl=1"), ["search", path, "--key-budget", "kl=1"]),
        (lambda: dump.search("kl_mean=1e-3", plan=True, per_layer=True),
         ["search", path, "--key-budget", "kl_mean=1e-3", "--plan", "--per-layer"]),
        (lambda: dump.search("kl_mean=1e-3", plan=True, engine="vllm --kv-cache-dtype fp8"),
         ["search", path, "--key-budget", "kl_mean=1e-3", "--plan", "--engine", "vllm --kv-cache-dtype fp8"]),
        (lambda: dump.diagnose(layers="5"), ["diagnose", path, "--layers", "5"]),
    ]
    for call, args in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == cli_error(*args), args


@pytest.fixture(scope="module")
def long_dump(tmp_path_factory):
    """A dump whose eval runs for many progress calls (several layers of 2048 tokens)."""
    from conftest import synth
    return synth(tmp_path_factory.mktemp("long") / "long.h5", layers=6, kv_heads=2, heads=8, tokens=2048,
                 queries=64, head_dim=64, seed=2)


def test_progress_reaches_one_and_false_cancels(long_dump):
    dump = kvscope.open(long_dump)
    seen = []
    dump.eval(preset="kivi-2", progress=lambda f, what: seen.append((f, what)))
    assert seen and seen[-1][0] == 1.0
    assert all(0.0 <= f <= 1.0 for f, _ in seen)
    calls = []
    with pytest.raises(kvscope.Cancelled):
        dump.eval(preset="kivi-2", progress=lambda f, what: calls.append(f) or False)
    assert len(calls) == 1  # the first False stops the work


def test_a_callbacks_exception_stops_the_work_and_propagates(long_dump):
    class Stop(Exception):
        pass

    def boom(fraction, what):
        raise Stop(what)

    with pytest.raises(Stop):
        kvscope.open(long_dump).eval(preset="kivi-2", progress=boom)


def test_ctrl_c_raises_keyboardinterrupt_from_the_work(long_dump):
    # SIGINT is sent from inside the work (the first progress call), so the test needs no timing:
    # the signal handler runs at the next poll and the eval ends with KeyboardInterrupt.
    sent = []

    def interrupt(fraction, what):
        if not sent:
            sent.append(fraction)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        kvscope.open(long_dump).eval(preset="kivi-2", progress=interrupt)
    assert sent and sent[0] < 1.0
    # The interpreter and the dump are fine afterwards.
    assert kvscope.open(long_dump).eval(preset="kivi-2", layers="0")["summary"]["entries"] == 2
