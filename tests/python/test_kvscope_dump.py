# SPDX-License-Identifier: GPL-3.0-or-later
"""python/kvscope_dump.py: dumps written from numpy / torch caches open in kvscope-cli.

Run by ctest (tests/python/CMakeLists.txt sets KVSCOPE_CLI and PYTHONPATH), or by hand:
  KVSCOPE_CLI=build/x/app/kvscope-cli PYTHONPATH=python /usr/bin/python3 tests/python/test_kvscope_dump.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import h5py  # noqa: E402
import kvscope_dump  # noqa: E402

try:
    import torch
except ImportError:  # the numpy tests still run
    torch = None

CLI = os.environ.get("KVSCOPE_CLI", "")
NO_TORCH = "torch is not installed (Debian: python3-torch): the torch/bfloat16 tests are skipped"


def cli(*args):
    if not CLI or not os.path.exists(CLI):
        raise unittest.SkipTest("KVSCOPE_CLI does not name kvscope-cli (set by tests/python/CMakeLists.txt)")
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def info(path):
    r = cli("info", "--json", path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def random_cache(rng, layers=3, batch=1, kv_heads=2, tokens=24, head_dim=16, dtype=np.float32):
    return tuple((rng.standard_normal((batch, kv_heads, tokens, head_dim)).astype(dtype),
                  rng.standard_normal((batch, kv_heads, tokens, head_dim)).astype(dtype)) for _ in range(layers))


class NumpyInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rng = np.random.default_rng(3)

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_legacy_tuple_with_queries_opens_and_evaluates(self):
        cache = random_cache(self.rng)
        queries = [self.rng.standard_normal((1, 4, 24, 16)).astype(np.float32) for _ in range(3)]
        out = self.path("np.h5")
        kvscope_dump.write_dump(out, cache, queries=queries, model="toy", rope_theta=500000.0, rope_style="half",
                                token_text=["t%d" % i for i in range(24)], tokens=list(range(24)))
        j = info(out)
        self.assertEqual((j["layers"], j["kv_heads"], j["heads"], j["tokens"], j["queries"], j["head_dim"]),
                         (3, 2, 4, 24, 24, 16))
        self.assertEqual(j["sequences"], 1)
        self.assertEqual(j["model"], "toy")
        self.assertEqual(j["rope_style"], "half")
        self.assertEqual(j["rope_theta"], 500000.0)
        self.assertTrue(j["has_tokens"] and j["has_token_text"] and j["has_query"])
        self.assertEqual(j["warnings"], [])
        with h5py.File(out) as f:
            self.assertEqual(f.attrs["kvdump_version"], 1)
            self.assertEqual(f["layers/1/key"].shape, (2, 24, 16))  # batch of 1 dropped
            np.testing.assert_array_equal(f["layers/2/value"][()], cache[2][1][0])
            np.testing.assert_array_equal(f["layers/0/query"][()], queries[0][0])
        r = cli("eval", out, "--key", "int4", "--value", "int4", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertIsNotNone(report["summary"]["attention"])
        self.assertGreater(report["summary"]["key"]["rel_error"], 0.0)
        self.assertLess(report["summary"]["key"]["rel_error"], 0.5)

    def test_newer_dynamic_cache_layers_are_read(self):
        class Layer:  # transformers >= 4.56: DynamicCache.layers[i].keys / .values
            def __init__(self, k, v):
                self.keys, self.values = k, v

        class Cache:
            def __init__(self, pairs):
                self.layers = [Layer(k, v) for k, v in pairs]

        pairs = random_cache(self.rng, layers=2)
        self.assertEqual(len(kvscope_dump.cache_layers(Cache(pairs))), 2)
        out = self.path("layers.h5")
        kvscope_dump.write_dump(out, Cache(pairs))
        with h5py.File(out) as f:
            np.testing.assert_array_equal(f["layers/1/key"][()], pairs[1][0][0])
            np.testing.assert_array_equal(f["layers/1/value"][()], pairs[1][1][0])

    def test_batch_axis_is_kept_when_batch_exceeds_one(self):
        out = self.path("b3.h5")
        kvscope_dump.write_dump(out, random_cache(self.rng, batch=3), token_text=[["a"] * 24, ["b"] * 24, ["c"] * 24])
        with h5py.File(out) as f:
            self.assertEqual(f["layers/0/key"].shape, (3, 2, 24, 16))
        j = info(out)
        self.assertEqual(j["sequences"], 3)
        self.assertEqual(j["tokens"], 24)
        r = cli("eval", out, "--key", "int8", "--value", "int8", "--sequence", "2", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_float16_is_kept_and_three_dimensional_arrays_accepted(self):
        out = self.path("h.h5")
        cache = [(k[0].astype(np.float16), v[0].astype(np.float16)) for k, v in random_cache(self.rng)]
        kvscope_dump.write_dump(out, cache)
        self.assertEqual(info(out)["dtype"], "float16")

    def test_pre_rope_keys_rotate_to_the_keys_under_the_dump_convention(self):
        # Keys built with apply_rope('half') from key_pre_rope: kvscope's prerope path re-rotates them
        # the same way, so fp16 with prerope costs only fp16 rounding.
        pre = [self.rng.standard_normal((1, 2, 24, 16)).astype(np.float32) for _ in range(2)]
        cache = [(kvscope_dump.apply_rope(p, theta=10000.0, style="half"),
                  self.rng.standard_normal((1, 2, 24, 16)).astype(np.float32)) for p in pre]
        out = self.path("pre.h5")
        kvscope_dump.write_dump(out, cache, key_pre_rope=pre, rope_theta=10000.0, rope_style="half")
        r = cli("eval", out, "--key", "fp16,prerope", "--value", "none", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(json.loads(r.stdout)["summary"]["key"]["rel_error"], 1e-3)
        # The wrong convention would not rotate back: interleaved RoPE differs from half.
        wrong = self.path("wrong.h5")
        kvscope_dump.write_dump(wrong, cache, key_pre_rope=pre, rope_theta=10000.0, rope_style="interleaved")
        r = cli("eval", wrong, "--key", "fp16,prerope", "--value", "none", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(json.loads(r.stdout)["summary"]["key"]["rel_error"], 0.1)

    def test_apply_rope_turns_pairs_by_position_times_frequency(self):
        x = np.zeros((1, 3, 4), np.float32)
        x[0, :, 0] = 1.0  # pair 0 in both styles' first slot
        half = kvscope_dump.apply_rope(x, theta=100.0, style="half")
        # D = 4: pair 0 = (0, 2) turns by position, pair 1 = (1, 3) by position / 10.
        np.testing.assert_allclose(half[0, 2], [np.cos(2.0), 0.0, np.sin(2.0), 0.0], atol=1e-6)
        inter = kvscope_dump.apply_rope(x, theta=100.0, style="interleaved")
        np.testing.assert_allclose(inter[0, 2], [np.cos(2.0), np.sin(2.0), 0.0, 0.0], atol=1e-6)

    def test_llama_capture_refuses_models_that_normalize_q_and_k(self):
        # Qwen3's q_norm/k_norm act between k_proj and RoPE: hooks on k_proj would store the
        # wrong keys, so LlamaCapture refuses and names record (no torch needed to build it).
        class Attn:
            q_proj = k_proj = object()
            q_norm = k_norm = object()

        class Layer:
            self_attn = Attn()

        class Inner:
            layers = [Layer()]

        class Config:
            num_attention_heads, num_key_value_heads, hidden_size = 4, 2, 16

        class Model:
            config = Config()
            model = Inner()

        with self.assertRaises(ValueError) as ctx:
            kvscope_dump.LlamaCapture(Model())
        self.assertIn("kvscope-cli record", str(ctx.exception))

    def test_bad_input_raises_and_leaves_the_previous_file(self):
        out = self.path("keep.h5")
        kvscope_dump.write_dump(out, random_cache(self.rng, layers=1))
        before = read_bytes(out)
        bad = list(random_cache(self.rng, layers=2))
        bad[1] = (bad[1][0][:, :, :10], bad[1][1])
        with self.assertRaises(ValueError):
            kvscope_dump.write_dump(out, bad)
        with self.assertRaises(ValueError):
            kvscope_dump.write_dump(out, random_cache(self.rng), queries=[np.zeros((1, 3, 24, 16), np.float32)] * 3)
        with self.assertRaises(TypeError):
            kvscope_dump.write_dump(out, [(np.zeros((1, 2, 4, 8), np.int32), np.zeros((1, 2, 4, 8), np.int32))])
        with self.assertRaises(ValueError):
            kvscope_dump.write_dump(out, random_cache(self.rng), rope_style="neox")
        self.assertEqual(read_bytes(out), before)
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["keep.h5"], "no temporary file is left behind")

    def test_failure_while_writing_removes_the_temporary_file(self):
        out = self.path("w.h5")

        class Exploding:
            key_cache = [np.zeros((1, 2, 4, 8), np.float32)]
            value_cache = [np.zeros((1, 2, 4, 8), np.float32)]

        kvscope_dump.write_dump(out, Exploding())
        before = read_bytes(out)
        # A failure inside h5py mid-write (a full disk, say) must leave the old file and no temporary one.
        with mock.patch.object(h5py.Group, "create_dataset", side_effect=OSError("disk full")):
            with self.assertRaises(OSError):
                kvscope_dump.write_dump(out, Exploding(), model="new")
        self.assertEqual(read_bytes(out), before)
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["w.h5"])


@unittest.skipIf(torch is None, NO_TORCH)
class TorchInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        torch.manual_seed(0)

    def tearDown(self):
        self.dir.cleanup()

    def test_bfloat16_cache_object_becomes_float32(self):
        class DynamicCacheLike:  # the key_cache / value_cache lists of transformers' DynamicCache
            def __init__(self, n):
                self.key_cache = [torch.randn(1, 2, 20, 8, dtype=torch.bfloat16) for _ in range(n)]
                self.value_cache = [torch.randn(1, 2, 20, 8, dtype=torch.bfloat16) for _ in range(n)]

        cache = DynamicCacheLike(2)
        q = [torch.randn(1, 6, 5, 8, dtype=torch.bfloat16) for _ in range(2)]
        out = os.path.join(self.dir.name, "bf16.h5")
        kvscope_dump.write_dump(out, cache, queries=q, model="bf16-toy")
        j = info(out)
        self.assertEqual(j["dtype"], "float32")
        self.assertEqual((j["layers"], j["kv_heads"], j["heads"], j["tokens"], j["queries"]), (2, 2, 6, 20, 5))
        with h5py.File(out) as f:
            self.assertEqual(f["layers/1/key"].dtype, np.float32)
            np.testing.assert_array_equal(f["layers/1/key"][()], cache.key_cache[1][0].float().numpy())
        r = cli("eval", out, "--preset", "kivi-4", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_legacy_tuple_of_tensors_with_grad(self):
        kv = tuple((torch.randn(2, 1, 6, 4, requires_grad=True), torch.randn(2, 1, 6, 4)) for _ in range(2))
        out = os.path.join(self.dir.name, "t.h5")
        kvscope_dump.write_dump(out, kv, tokens=torch.arange(12).reshape(2, 6))
        self.assertEqual(info(out)["sequences"], 2)

    def test_llama_capture_hooks_q_and_k_projections(self):
        nn = torch.nn

        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.q_proj = nn.Linear(16, 4 * 4, bias=False)
                self.k_proj = nn.Linear(16, 2 * 4, bias=False)

            def forward(self, x):
                return self.q_proj(x).sum() + self.k_proj(x).sum()

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.self_attn = Attn()

        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Layer(), Layer()])

        class Config:
            num_attention_heads, num_key_value_heads, hidden_size = 4, 2, 16

        class Model(nn.Module):
            config = Config()

            def __init__(self):
                super().__init__()
                self.model = Inner()

            def forward(self, x):
                return sum(layer.self_attn(x) for layer in self.model.layers)

        m = Model()
        x1, x2 = torch.randn(1, 5, 16), torch.randn(1, 1, 16)
        with kvscope_dump.LlamaCapture(m) as cap:
            m(x1)
            m(x2)  # a generation step: concatenated along T
        m(x1)  # hooks are gone: nothing more is captured
        q, k = cap.queries_pre_rope(), cap.keys_pre_rope()
        self.assertEqual(q[1].shape, (1, 4, 6, 4))
        self.assertEqual(k[0].shape, (1, 2, 6, 4))
        layer = m.model.layers[1].self_attn
        expected_k = layer.k_proj(torch.cat([x1, x2], dim=1)).detach().reshape(1, 6, 2, 4).transpose(1, 2).numpy()
        np.testing.assert_allclose(k[1], expected_k, rtol=1e-6, atol=1e-6)
        # Head h of the query is columns [4h, 4h+4) of q_proj's output.
        full_q = layer.q_proj(x1).detach().numpy()
        np.testing.assert_allclose(q[1][0, 3, :5], full_q[0, :, 12:16], rtol=1e-6, atol=1e-6)
        # Write a dump with them: keys = RoPE(pre-RoPE keys), queries after RoPE.
        keys = [kvscope_dump.apply_rope(kk) for kk in k]
        cache = [(kk, np.ones_like(kk)) for kk in keys]
        out = os.path.join(self.dir.name, "cap.h5")
        kvscope_dump.write_dump(out, cache, queries=[kvscope_dump.apply_rope(qq) for qq in q], key_pre_rope=k,
                                rope_style="half", rope_theta=10000.0)
        j = info(out)
        self.assertTrue(j["has_key_pre_rope"] and j["has_query"])


if __name__ == "__main__":
    if torch is None:
        print("note: " + NO_TORCH, file=sys.stderr)
    unittest.main(verbosity=2)
