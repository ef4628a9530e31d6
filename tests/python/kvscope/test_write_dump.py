# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope.write_dump: numpy arrays become a canonical dump that kvscope-cli opens, reads back and
evaluates; bad input raises with the message and leaves no file."""
import os

import numpy as np
import pytest

import kvscope
from conftest import cli, cli_json


def cache(rng, layers=3, kv_heads=2, heads=4, tokens=40, queries=8, dim=32):
    keys = [rng.standard_normal((kv_heads, tokens, dim)).astype(np.float32) for _ in range(layers)]
    values = [rng.standard_normal((kv_heads, tokens, dim)).astype(np.float32) for _ in range(layers)]
    qs = [rng.standard_normal((heads, queries, dim)).astype(np.float32) for _ in range(layers)]
    return keys, values, qs


def read_back(path, layer, kind, tmp_path, sequence=0):
    out = tmp_path / "back.f32"
    shape = cli("read", path, "--layer", layer, "--tensor", kind, "--sequence", sequence, "--out", out).stdout.split()
    return np.fromfile(out, dtype=np.float32).reshape([int(s) for s in shape])


def test_float32_round_trips_through_cli_info_read_and_eval(tmp_path):
    rng = np.random.default_rng(4)
    keys, values, qs = cache(rng)
    path = str(tmp_path / "w.h5")
    kvscope.write_dump(path, keys, values, qs, tokens=list(range(100, 140)), token_text=["t%d" % i for i in range(40)],
                       model="numpy-toy", rope_theta=500000.0, rope_style="interleaved", softmax_scale=0.125,
                       dtype="float32", model_path="/models/toy.bin")
    info = cli_json("info", path, "--json")
    assert (info["layers"], info["kv_heads"], info["heads"], info["tokens"], info["queries"], info["head_dim"]) == \
        (3, 2, 4, 40, 8, 32)
    assert (info["model"], info["dtype"], info["rope_style"], info["rope_theta"], info["softmax_scale"]) == \
        ("numpy-toy", "float32", "interleaved", 500000.0, 0.125)
    assert info["model_path"] == "/models/toy.bin"
    assert info["has_tokens"] and info["has_token_text"] and info["has_query"] and not info["has_key_pre_rope"]
    assert info["warnings"] == []
    for layer in range(3):
        assert read_back(path, layer, "key", tmp_path).tobytes() == keys[layer].tobytes()
        assert read_back(path, layer, "value", tmp_path).tobytes() == values[layer].tobytes()
        assert read_back(path, layer, "query", tmp_path).tobytes() == qs[layer].tobytes()
    dump = kvscope.open(path)
    assert dump.tokens == list(range(100, 140))
    report = dump.eval(key="int4,axis=channel,group=32", value="int4")
    assert report == cli_json("eval", path, "--key", "int4,axis=channel,group=32", "--value", "int4", "--json", "-")
    assert report["summary"]["attention"] is not None


def test_float16_on_disk_is_the_arrays_rounded_to_nearest_even(tmp_path):
    rng = np.random.default_rng(8)
    keys, values, _ = cache(rng, layers=2)
    keys[0][0, 0, :4] = [65520.0, -1e-8, 1.00048828125, 3.0e-5]  # overflow, underflow, a tie, a subnormal
    path = str(tmp_path / "h.h5")
    kvscope.write_dump(path, keys, values)
    assert cli_json("info", path, "--json")["dtype"] == "float16"
    with np.errstate(over="ignore"):
        expected = keys[0].astype(np.float16).astype(np.float32)
    assert read_back(path, 0, "key", tmp_path).tobytes() == expected.tobytes()
    # float16 arrays are taken as they are.
    path16 = str(tmp_path / "h16.h5")
    with np.errstate(over="ignore"):
        keys16 = [k.astype(np.float16) for k in keys]
    kvscope.write_dump(path16, keys16, [v.astype(np.float16) for v in values])
    assert read_back(path16, 1, "value", tmp_path).tobytes() == values[1].astype(np.float16).astype(np.float32).tobytes()


def test_pre_rope_keys_and_a_batch(tmp_path):
    rng = np.random.default_rng(9)
    k = [rng.standard_normal((3, 2, 16, 8)).astype(np.float32) for _ in range(2)]  # [B, KVH, T, D]
    v = [rng.standard_normal((3, 2, 16, 8)).astype(np.float32) for _ in range(2)]
    pre = [rng.standard_normal((3, 2, 16, 8)).astype(np.float32) for _ in range(2)]
    path = str(tmp_path / "b.h5")
    kvscope.write_dump(path, k, v, key_pre_rope=pre, dtype="float32", tokens=np.arange(48).reshape(3, 16))
    info = cli_json("info", path, "--json")
    assert info["sequences"] == 3 and info["has_key_pre_rope"]
    assert read_back(path, 1, "key", tmp_path, sequence=2).tobytes() == k[1][2].tobytes()
    assert read_back(path, 0, "key_pre_rope", tmp_path, sequence=1).tobytes() == pre[0][1].tobytes()
    assert kvscope.open(path).token_ids(2) == list(range(32, 48))


def test_bad_input_raises_and_leaves_no_file(tmp_path):
    rng = np.random.default_rng(2)
    keys, values, qs = cache(rng, layers=2)
    path = str(tmp_path / "bad.h5")
    cases = [
        (TypeError, "keys\\[1\\]: dtype float64", dict(keys=[keys[0], keys[1].astype(np.float64)], values=values)),
        (ValueError, "values\\[0\\]: the array is not C-contiguous",
         dict(keys=keys, values=[np.asfortranarray(values[0]), values[1]])),
        (ValueError, "values: 1 layers, but keys has 2", dict(keys=keys, values=values[:1])),
        (TypeError, "keys: expected a list of per-layer arrays", dict(keys=keys[0], values=values)),
        (ValueError, "dtype 'bfloat16': expected float16 or float32", dict(keys=keys, values=values, dtype="bfloat16")),
        (ValueError, "rope_style 'spiral'", dict(keys=keys, values=values, rope_style="spiral")),
        (TypeError, "note=: extra attributes are strings", dict(keys=keys, values=values, note=3)),
        (ValueError, "values\\[1\\]", dict(keys=keys, values=[values[0], values[1][:, :5]])),  # the writer's shape check
        (ValueError, "query heads 3 is not a multiple of kv heads 2", dict(keys=keys, values=values, queries=[q[:3] for q in qs])),
    ]
    for exc, message, kwargs in cases:
        with pytest.raises(exc, match=message):
            kvscope.write_dump(path, **kwargs)
        assert not os.path.exists(path), kwargs.keys()
        assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
