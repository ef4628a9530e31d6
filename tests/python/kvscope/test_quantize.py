# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope.quantize: equal, bit for bit, to `kvscope-cli read --spec` (the reconstruction eval
measures) for every format of the table and the pipeline's options, equal to the contract's int
formula computed in numpy, and refusing bad input with the CLI's messages."""
import numpy as np
import pytest

import kvscope
from conftest import cli, cli_error, cli_json

# The pipeline's options on top of the format table's defaults (quantization.md §1-4, §12).
VARIANTS = [
    ("key", "int4,axis=channel,group=32"), ("value", "int2,sym,axis=token,group=16"), ("key", "int8,axis=head"),
    ("key", "int4,rot=hadamard"), ("key", "int3,outliers=0.01"), ("value", "fp8_e4m3,axis=token"),
    ("key", "int2,axis=channel,group=32,residual=32,sinks=4"), ("key", "q4_0,rot=rht,seed=3"),
    ("key", "int4,prerope"), ("value", "nf4,clip=mse"), ("key", "int4,zero=int"), ("value", "int4,round=even"),
]


def cli_reconstruction(path, layer, kind, spec, tmp_path):
    out = tmp_path / "r.f32"
    shape = cli("read", path, "--layer", layer, "--tensor", kind, "--spec", spec, "--out", out).stdout.split()
    return np.fromfile(out, dtype=np.float32).reshape([int(s) for s in shape])


def check_equal_or_same_error(dump, path, layer, kind, spec, tmp_path):
    """True when both give the same reconstruction; False when both refuse the spec with the same
    message (a spec the tensor's shape does not allow)."""
    tensor = dump.read(layer, kind)
    pre = dump.key_pre_rope(layer) if kind == "key" else None
    out = tmp_path / "r.f32"
    r = cli("read", path, "--layer", layer, "--tensor", kind, "--spec", spec, "--out", out, check=False)

    def ours():
        return kvscope.quantize(tensor, spec, side=kind, pre_rope=pre, rope_theta=dump.attributes["rope_theta"],
                                rope_style=dump.attributes["rope_style"], layer=layer, layers=dump.layers)

    if r.returncode != 0:
        assert r.returncode == 2, r.stderr
        with pytest.raises(ValueError) as e:
            ours()
        assert "kvscope-cli: " + str(e.value) == r.stderr.splitlines()[0]
        return False
    expected = np.fromfile(out, dtype=np.float32).reshape([int(x) for x in r.stdout.split()])
    got = ours()
    assert got.reconstruction.dtype == np.float32 and got.reconstruction.shape == tensor.shape
    assert got.reconstruction.tobytes() == expected.tobytes(), spec
    return True


def test_every_format_equals_the_cli_reconstruction(dumps, tmp_path):
    path = dumps["llama"]
    dump = kvscope.open(path)
    equal = 0
    for f in kvscope.formats():
        for kind in ("key", "value"):
            equal += check_equal_or_same_error(dump, path, 1, kind, f["default_spec"], tmp_path)
    assert equal >= len(kvscope.formats())  # most formats apply to this shape


@pytest.mark.parametrize("kind,spec", VARIANTS)
def test_pipeline_options_equal_the_cli_reconstruction(dumps, tmp_path, kind, spec):
    path = dumps["fp32"]  # interleaved RoPE, theta 500000, D = 128: prerope must use them
    assert check_equal_or_same_error(kvscope.open(path), path, 1, kind, spec, tmp_path)


def test_a_plan_gives_each_layer_its_spec(dumps, tmp_path):
    path = dumps["llama"]
    dump = kvscope.open(path)
    plan = "q4_0;last1:q8_0"
    for layer in range(dump.layers):
        got = kvscope.quantize(dump.key(layer), plan, layer=layer, layers=dump.layers)
        assert got.spec == ("q8_0" if layer == dump.layers - 1 else "q4_0")
        assert got.reconstruction.tobytes() == cli_reconstruction(path, layer, "key", plan, tmp_path).tobytes()
    with pytest.raises(ValueError, match="per layer"):
        kvscope.quantize(dump.key(0), plan)


def test_storage_equals_evals_storage_bits(dumps):
    path = dumps["llama"]
    dump = kvscope.open(path)
    spec = "int3,axis=channel,group=32,residual=16"
    got = kvscope.quantize(dump.value(0), spec, side="value")
    report = cli_json("eval", path, "--key", "none", "--value", spec, "--json", "-")
    assert got.storage == report["value"]["storage_bits"]
    assert got.bits_per_element == report["value"]["bits_per_element"]
    assert got.spec == report["value"]["spec"]


def test_a_preset_quantizes_with_its_sides_spec(dumps):
    dump = kvscope.open(dumps["llama"])
    resolved = dump.resolve(preset="kivi-2")
    k = kvscope.quantize(dump.key(0), preset="kivi-2", side="key", layers=dump.layers)
    v = kvscope.quantize(dump.value(0), preset="kivi-2", side="value", layers=dump.layers)
    assert (k.spec, v.spec) == (resolved["key"], resolved["value"])
    assert k.reconstruction.tobytes() == kvscope.quantize(dump.key(0), resolved["key"]).reconstruction.tobytes()


def round_half_away(y):
    t = np.trunc(y)
    return np.where(np.abs(y - t) >= 0.5, t + np.sign(y), t).astype(y.dtype)


def test_int4_groups_follow_the_contracts_formula():
    # quantization.md §2, int<b> asym: s = meta((hi−lo)/n), m = meta(lo) (meta: fp16, from the
    # exact value), q = clamp(rnd((x−m)/s), 0, n), x̂ = q·s + m, the last two in float32 as
    # core/quant/reference.cpp (groupParams, quantizeValue) computes them.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 24, 64)).astype(np.float32) * np.float32(3)
    g = x.reshape(2, 24, 2, 32).astype(np.float64)
    lo, hi = g.min(axis=3, keepdims=True), g.max(axis=3, keepdims=True)
    s = ((hi - lo) / 15).astype(np.float16).astype(np.float32)
    m = lo.astype(np.float16).astype(np.float32)
    xg = x.reshape(2, 24, 2, 32)
    q = np.clip(round_half_away((xg - m) / s), 0, 15).astype(np.float32)
    expected = (q * s + m).reshape(x.shape)
    got = kvscope.quantize(x, "int4,group=32")
    assert got.reconstruction.tobytes() == expected.tobytes()
    # bits: 4 payload + (fp16 scale + fp16 min) / 32 per element
    assert got.bits_per_element == 4 + 32 / 32


@pytest.mark.parametrize("layout", ["thd", "hdt", "dth"])
def test_axis_layouts_give_the_same_numbers_in_the_callers_layout(layout):
    rng = np.random.default_rng(5)
    htd = rng.standard_normal((2, 40, 32)).astype(np.float32)
    order = ["htd".index(c) for c in layout]
    same = np.ascontiguousarray(htd.transpose(order))
    expected = kvscope.quantize(htd, "int4,axis=channel,group=8").reconstruction
    got = kvscope.quantize(same, "int4,axis=channel,group=8", axis_layout=layout).reconstruction
    assert got.shape == same.shape and got.flags.c_contiguous
    assert got.tobytes() == np.ascontiguousarray(expected.transpose(order)).tobytes()
    one = np.ascontiguousarray(htd[1])
    assert kvscope.quantize(one, "q4_0", axis_layout="td").reconstruction.tobytes() == \
        kvscope.quantize(htd[1:2].copy(), "q4_0").reconstruction[0].tobytes()


def test_bad_input_raises_with_the_message(dumps, tmp_path):
    x = np.ones((2, 8, 16), np.float32)
    with pytest.raises(TypeError, match="dtype float64; kvscope takes float32"):
        kvscope.quantize(x.astype(np.float64), "int4")
    with pytest.raises(TypeError, match="expected a numpy array, got list"):
        kvscope.quantize([[1.0]], "int4")
    with pytest.raises(ValueError, match="not C-contiguous"):
        kvscope.quantize(np.ones((16, 8, 2), np.float32).transpose(2, 1, 0), "int4")
    with pytest.raises(ValueError, match="axis_layout 'htx'"):
        kvscope.quantize(x, "int4", axis_layout="htx")
    with pytest.raises(ValueError, match="2 axes, but axis_layout 'htd' has 3"):
        kvscope.quantize(x[0], "int4")
    with pytest.raises(ValueError, match="exactly one of"):
        kvscope.quantize(x, "int4", preset="kivi-2")
    path = dumps["llama"]
    for spec in ("int4,outliers=nan", "int4,group=-3", "int9", "q4_0,rot=hadamard:7"):
        args = ("read", path, "--layer", 0, "--tensor", "key", "--spec", spec, "--out", tmp_path / "x.f32")
        with pytest.raises(ValueError) as e:
            kvscope.quantize(kvscope.open(path).key(0), spec)
        assert str(e.value) == cli_error(*args), spec
    with pytest.raises(ValueError, match="key_pre_rope"):
        kvscope.quantize(x, "int4,prerope")  # no pre_rope= given
    with pytest.raises(ValueError) as e:
        kvscope.quantize(x, preset="no-such-preset")
    assert str(e.value) == cli_error("eval", path, "--preset", "no-such-preset")
