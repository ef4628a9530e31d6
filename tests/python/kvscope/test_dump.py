# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope.open and Dump: metadata equals `kvscope-cli info --json`, tensors equal `kvscope-cli read`
bit for bit, and bad input raises with the CLI's message."""
import os
import pickle

import numpy as np
import pytest

import kvscope
from conftest import cli, cli_error, cli_json

KINDS = ("key", "value", "query", "key_pre_rope")


def cli_read(path, layer, kind, tmp_path, sequence=0):
    out = tmp_path / ("%s-%d-%d.f32" % (kind, layer, sequence))
    shape = cli("read", path, "--layer", layer, "--tensor", kind, "--sequence", sequence, "--out", out).stdout.split()
    return np.fromfile(out, dtype=np.float32).reshape([int(s) for s in shape])


def test_info_equals_cli_info_json(dumps):
    for path in dumps.values():
        d = kvscope.open(path)
        assert d.info == cli_json("info", path, "--json")
        assert d.shape == (d.info["layers"], d.info["kv_heads"], d.info["heads"], d.info["tokens"],
                           d.info["queries"], d.info["head_dim"], d.info["sequences"])
        assert d.layers == d.info["layers"]


def test_scan_equals_cli_info_scan(dumps):
    path = dumps["sinks"]
    assert kvscope.open(path).scan() == cli_json("info", path, "--json", "--scan")


@pytest.mark.parametrize("name", ["llama", "fp32", "sinks"])
def test_tensors_equal_cli_read_bit_for_bit(dumps, name, tmp_path):
    path = dumps[name]
    d = kvscope.open(path)
    for sequence in range(d.shape.sequences):
        for layer in range(d.layers):
            for kind in KINDS:
                expected = cli_read(path, layer, kind, tmp_path, sequence)
                got = d.read(layer, kind, sequence)
                assert got.dtype == np.float32 and got.flags.c_contiguous
                assert got.shape == expected.shape
                assert got.tobytes() == expected.tobytes(), (name, sequence, layer, kind)
    # The named readers are read(…, kind).
    np.testing.assert_array_equal(d.key(1), d.read(1, "key"))
    np.testing.assert_array_equal(d.value(1), d.read(1, "value"))
    np.testing.assert_array_equal(d.query(0), d.read(0, "query"))
    np.testing.assert_array_equal(d.key_pre_rope(0), d.read(0, "key_pre_rope"))
    assert d.key(0).shape == (d.shape.kv_heads, d.shape.tokens, d.shape.head_dim)
    assert d.query(0).shape == (d.shape.heads, d.shape.queries, d.shape.head_dim)


def test_in_process_reads_equal_isolated_reads(dumps, monkeypatch, tmp_path):
    path = dumps["fp32"]
    isolated = kvscope.open(path).key(1)
    monkeypatch.setenv("KVSCOPE_ISOLATE_READS", "0")
    assert kvscope.open(path).key(1).tobytes() == isolated.tobytes()


def test_attributes_and_tokens(dumps, tmp_path):
    d = kvscope.open(dumps["fp32"])
    assert d.attributes == {"model": "synthetic-llama", "rope_theta": 500000.0, "rope_style": "interleaved",
                            "softmax_scale": d.info["softmax_scale"], "model_path": ""}
    h5py = pytest.importorskip("h5py")
    with h5py.File(dumps["fp32"]) as f:  # read independently of kvscope
        assert d.tokens == f["tokens"][()].tolist() and len(d.tokens) == 80
    out = tmp_path / "tok.h5"
    k = np.zeros((1, 4, 8), np.float32)
    kvscope.write_dump(out, [k], [k], tokens=[5, 6, 7, 8], token_text=["a", "b", "c", "d"])
    w = kvscope.open(out)
    assert w.tokens == [5, 6, 7, 8] and w.token_text() == ["a", "b", "c", "d"]


def test_a_dump_pickles_as_its_path(dumps):
    d = kvscope.open(dumps["llama"])
    again = pickle.loads(pickle.dumps(d))
    assert again.path == d.path and again.info == d.info
    assert again.key(0).tobytes() == d.key(0).tobytes()


def test_missing_file_raises_oserror_with_the_cli_message(tmp_path):
    path = str(tmp_path / "nope.h5")
    with pytest.raises(OSError) as e:
        kvscope.open(path)
    assert str(e.value) == cli_error("info", path)


def test_not_a_dump_raises_valueerror_with_the_cli_message(tmp_path):
    path = tmp_path / "text.h5"
    path.write_text("not hdf5")
    with pytest.raises(ValueError) as e:
        kvscope.open(path)
    assert str(e.value) == cli_error("info", path)


def test_bad_reads_raise_with_the_cli_message(dumps, tmp_path):
    path = dumps["llama"]
    d = kvscope.open(path)
    out = tmp_path / "x.f32"
    with pytest.raises(ValueError) as e:
        d.read(7, "key")
    assert str(e.value) == cli_error("read", path, "--layer", 7, "--out", out)
    with pytest.raises(ValueError) as e:
        d.read(0, "keys")
    assert str(e.value) == cli_error("read", path, "--layer", 0, "--tensor", "keys", "--out", out)
    with pytest.raises(ValueError) as e:
        d.key(0, sequence=3)
    assert str(e.value) == cli_error("read", path, "--layer", 0, "--sequence", 3, "--out", out)
    assert not os.path.exists(out)


def test_a_closed_dump_refuses_reads(dumps):
    d = kvscope.open(dumps["llama"])
    d.close()
    with pytest.raises(ValueError, match="closed"):
        d.key(0)


def test_mapping_as_a_dict_reads_a_renamed_file(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(1)
    k = rng.standard_normal((2, 2, 16, 8)).astype(np.float32)  # [L, KVH, T, D]
    v = rng.standard_normal((2, 2, 16, 8)).astype(np.float32)
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f["cache/k"] = k
        f["cache/v"] = v
    mapping = {"key": {"path": "cache/k", "axes": "layer,head,token,dim"},
               "value": {"path": "cache/v", "axes": "layer,head,token,dim"}}
    d = kvscope.open(path, mapping=mapping)
    np.testing.assert_array_equal(d.key(1), k[1])
    np.testing.assert_array_equal(d.value(0), v[0])
