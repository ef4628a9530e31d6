# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope.record and kvscope.e2e on ../shared/models/stories260K.bin: the same dump and the same
JSON as `kvscope-cli record` and `kvscope-cli e2e --json`."""
import numpy as np
import pytest

import kvscope
from conftest import cli, cli_error, cli_json


@pytest.fixture(scope="module")
def recorded(stories, tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    py = str(d / "py.h5")
    kvscope.record(stories, py, prompt_tokens=[403, 407], steps=24, seed=3, temperature=0.8)
    ref = str(d / "cli.h5")
    cli("record", stories, "--out", ref, "--prompt-tokens", "403,407", "--steps", 24, "--seed", 3,
        "--temperature", 0.8)
    return py, ref


def test_record_writes_the_clis_dump(recorded):
    py, ref = recorded
    a, b = kvscope.open(py), kvscope.open(ref)
    info_a, info_b = dict(a.info), dict(b.info)
    assert info_a.pop("file") == py and info_b.pop("file") == ref
    assert info_a == info_b
    assert a.tokens == b.tokens and len(a.tokens) == 24
    for layer in range(a.layers):
        for kind in ("key", "value", "query", "key_pre_rope"):
            assert a.read(layer, kind).tobytes() == b.read(layer, kind).tobytes()


def test_e2e_equals_the_clis_json(stories, recorded):
    py, _ = recorded
    for kwargs, flags in (({"preset": "kivi-2"}, ["--preset", "kivi-2"]),
                          ({"key": "q4_0;last1:q8_0", "value": "q8_0"}, ["--key", "q4_0;last1:q8_0", "--value", "q8_0"])):
        assert kvscope.e2e(stories, py, **kwargs) == cli_json("e2e", stories, py, *flags, "--json", "-")


def test_model_errors_are_the_clis(stories, recorded, tmp_path):
    py, _ = recorded
    with pytest.raises(ValueError) as e:
        kvscope.e2e(stories, py, key="int4")
    assert str(e.value) == cli_error("e2e", stories, py, "--key", "int4")
    missing = str(tmp_path / "none.bin")
    with pytest.raises(OSError) as e:
        kvscope.record(missing, str(tmp_path / "o.h5"))
    assert str(e.value) == cli_error("record", missing, "--out", tmp_path / "o.h5")
    with pytest.raises(ValueError) as e:
        kvscope.record(stories, str(tmp_path / "o.h5"), tokens=[1, 2, 3], steps=2)
    assert str(e.value) == cli_error("record", stories, "--out", tmp_path / "o.h5", "--tokens", "1,2,3", "--steps", 2)
    assert not (tmp_path / "o.h5").exists()
    r = cli("record", stories, "--out", tmp_path / "o.h5", "--prompt", "Once upon a time", check=False)
    if r.returncode == 2:  # a llama2.c checkpoint without its tokenizer cannot encode text: the same refusal
        with pytest.raises(ValueError) as e:
            kvscope.record(stories, str(tmp_path / "o.h5"), text="Once upon a time")
        assert "kvscope-cli: " + str(e.value) == r.stderr.splitlines()[0]


def test_record_from_ids_and_from_text(stories, tmp_path):
    ids = str(tmp_path / "ids.h5")
    d = kvscope.record(stories, ids, tokens=[1, 403, 407, 500])
    assert d.tokens == [1, 403, 407, 500]
    ref = str(tmp_path / "ids-cli.h5")
    cli("record", stories, "--out", ref, "--tokens", "1,403,407,500")
    assert d.key(1).tobytes() == kvscope.open(ref).key(1).tobytes()
