# SPDX-License-Identifier: GPL-3.0-or-later
"""Write KV dumps that kvscope opens, from PyTorch / Hugging Face caches or numpy arrays.

The file follows kvscope's dump format, version 1 (dump-format.md): one HDF5 file with
``/layers/<l>/key`` and ``value`` of shape [KVH, T, D] (after RoPE, as the cache holds them),
optionally ``query`` [H, Tq, D] and ``key_pre_rope`` [KVH, T, D], and root attributes.

Needs numpy and h5py; torch is optional (tensors are converted, bfloat16 to float32).
See docs/huggingface.md for a complete recipe with a Llama-family model. For Llama, Mistral,
Qwen2/2.5 and Qwen3 checkpoints `kvscope-cli record MODEL_FOLDER` runs the model itself (no
Python, the right keys for per-head q/k norms); this module is for what record does not run.
"""

import os
import tempfile

import numpy as np

try:
    import h5py
except ImportError as exc:  # pragma: no cover - reported to the user as is
    raise ImportError("kvscope_dump needs h5py (Debian: python3-h5py, pip: h5py)") from exc

__all__ = ["write_dump", "apply_rope", "cache_layers", "LlamaCapture", "DUMP_VERSION"]

DUMP_VERSION = 1
_ROPE_STYLES = ("half", "interleaved")


def _to_numpy(x, what):
    """A float numpy array from a torch tensor or array-like; bfloat16 becomes float32."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        t = x.detach().cpu()
        if not t.is_floating_point():
            raise TypeError("%s: expected a floating-point tensor, got %s" % (what, t.dtype))
        if str(t.dtype) not in ("torch.float16", "torch.float32", "torch.float64"):
            t = t.float()  # bfloat16 (and fp8) have no HDF5 type
        return t.numpy()
    a = np.asarray(x)
    if a.dtype.kind != "f":
        # ml_dtypes' bfloat16 arrays report kind 'V'; anything else that is not float is an error.
        if "bfloat16" in str(a.dtype):
            return a.astype(np.float32)
        raise TypeError("%s: expected floating-point values, got dtype %s" % (what, a.dtype))
    return a


def cache_layers(past_key_values):
    """[(key, value), …] per layer from the cache forms Hugging Face has used (see write_dump)."""
    if hasattr(past_key_values, "key_cache") and hasattr(past_key_values, "value_cache"):
        return list(zip(past_key_values.key_cache, past_key_values.value_cache))
    layers = getattr(past_key_values, "layers", None)
    if layers is not None and all(hasattr(l, "keys") and hasattr(l, "values") and not callable(l.keys)
                                  for l in layers):
        return [(l.keys, l.values) for l in layers]
    if hasattr(past_key_values, "to_legacy_cache"):
        return list(past_key_values.to_legacy_cache())
    if isinstance(past_key_values, (list, tuple)):
        out = []
        for i, entry in enumerate(past_key_values):
            if not isinstance(entry, (list, tuple)) or len(entry) < 2:
                raise TypeError("past_key_values[%d]: expected a (key, value) pair" % i)
            out.append((entry[0], entry[1]))
        return out
    raise TypeError("past_key_values: expected a tuple of per-layer (key, value) tensors or an object with "
                    "key_cache / value_cache lists, got %s" % type(past_key_values).__name__)


def _as_batched(a, what):
    """[B, heads, T, D]: a 3-D array gets a batch axis of 1."""
    if a.ndim == 3:
        return a[np.newaxis]
    if a.ndim != 4:
        raise ValueError("%s: expected shape [batch, heads, tokens, head_dim] or [heads, tokens, head_dim], got %s"
                         % (what, tuple(a.shape)))
    return a


def _per_layer(arrays, n_layers, what):
    if arrays is None:
        return None
    arrays = list(arrays)
    if len(arrays) != n_layers:
        raise ValueError("%s: %d layers given, the cache has %d" % (what, len(arrays), n_layers))
    return [_as_batched(_to_numpy(a, "%s[%d]" % (what, i)), "%s[%d]" % (what, i)) for i, a in enumerate(arrays)]


def _texts(token_text, batch, tokens):
    rows = [token_text] if batch == 1 and token_text and isinstance(token_text[0], str) else list(token_text)
    if len(rows) != batch or any(len(r) != tokens for r in rows):
        raise ValueError("token_text: expected %d strings%s" % (tokens, "" if batch == 1 else " for each of %d sequences" % batch))
    return [[str(s) for s in r] for r in rows]


def write_dump(path, past_key_values, queries=None, key_pre_rope=None, model=None, rope_theta=None,
               rope_style=None, token_text=None, tokens=None, softmax_scale=None):
    """Writes a kvscope dump to ``path`` atomically (a temporary file in the same folder, then os.replace).

    past_key_values: a tuple of per-layer (key, value) tensors [batch, kv_heads, T, D] (Hugging Face's
        legacy cache), or an object with ``key_cache`` / ``value_cache`` lists (DynamicCache), torch
        tensors or numpy arrays. Keys are the cached ones, i.e. after RoPE.
    queries: optional per-layer [batch, heads, Tq, D], after RoPE; row i is the query of position T - Tq + i.
    key_pre_rope: optional per-layer [batch, kv_heads, T, D], the keys before RoPE.
    model, rope_theta, rope_style ('half' for Hugging Face's rotate_half, 'interleaved' for Meta/llama2.c),
    softmax_scale: root attributes (omitted when None).
    token_text: T strings (or B lists of T); tokens: T ids (or [B, T]).

    A batch of 1 is written without the batch axis; a larger batch keeps it ([B, …] datasets, which
    kvscope shows one sequence at a time). bfloat16 is converted to float32; float16/32/64 are kept.
    """
    pairs = cache_layers(past_key_values)
    if not pairs:
        raise ValueError("past_key_values: no layers")
    keys = [_as_batched(_to_numpy(k, "key[%d]" % i), "key[%d]" % i) for i, (k, _) in enumerate(pairs)]
    values = [_as_batched(_to_numpy(v, "value[%d]" % i), "value[%d]" % i) for i, (_, v) in enumerate(pairs)]
    n_layers = len(keys)
    qs = _per_layer(queries, n_layers, "queries")
    pre = _per_layer(key_pre_rope, n_layers, "key_pre_rope")

    batch, kv_heads, n_tokens, head_dim = keys[0].shape
    for what, arrays in (("key", keys), ("value", values), ("key_pre_rope", pre)):
        for i, a in enumerate(arrays or []):
            if a.shape != keys[0].shape:
                raise ValueError("%s[%d]: shape %s differs from key[0]'s %s (all layers share [B, KVH, T, D])"
                                 % (what, i, tuple(a.shape), tuple(keys[0].shape)))
    if qs is not None:
        qb, heads, n_queries, qd = qs[0].shape
        if qb != batch or qd != head_dim or heads % kv_heads != 0 or not 1 <= n_queries <= n_tokens:
            raise ValueError("queries[0]: shape %s does not fit keys %s (needs the same batch and head_dim, "
                             "heads a multiple of kv_heads, 1 <= Tq <= T)" % (tuple(qs[0].shape), tuple(keys[0].shape)))
        for i, q in enumerate(qs):
            if q.shape != qs[0].shape:
                raise ValueError("queries[%d]: shape %s differs from queries[0]'s %s" % (i, tuple(q.shape), tuple(qs[0].shape)))
    if rope_style is not None and rope_style not in _ROPE_STYLES:
        raise ValueError("rope_style: %r is not one of %s" % (rope_style, ", ".join(_ROPE_STYLES)))
    texts = _texts(token_text, batch, n_tokens) if token_text is not None else None
    ids = None
    if tokens is not None:
        ids = tokens.detach().cpu().numpy() if hasattr(tokens, "detach") else np.asarray(tokens)
        ids = ids.astype(np.int64)
        if ids.ndim == 2 and ids.shape[0] == 1 and batch == 1:
            ids = ids[0]
        if ids.shape[-1] != n_tokens or (ids.ndim == 2 and ids.shape[0] != batch) or ids.ndim > 2:
            raise ValueError("tokens: shape %s does not fit %d sequences of %d tokens" % (ids.shape, batch, n_tokens))

    def shaped(a):
        return a[0] if batch == 1 else a

    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["kvdump_version"] = np.int64(DUMP_VERSION)
            if model is not None:
                f.attrs["model"] = str(model)
            if rope_theta is not None:
                f.attrs["rope_theta"] = float(rope_theta)
            if rope_style is not None:
                f.attrs["rope_style"] = rope_style
            if softmax_scale is not None:
                f.attrs["softmax_scale"] = float(softmax_scale)
            for l in range(n_layers):
                g = f.create_group("layers/%d" % l)
                g.create_dataset("key", data=shaped(keys[l]))
                g.create_dataset("value", data=shaped(values[l]))
                if qs is not None:
                    g.create_dataset("query", data=shaped(qs[l]))
                if pre is not None:
                    g.create_dataset("key_pre_rope", data=shaped(pre[l]))
            if ids is not None:
                f.create_dataset("tokens", data=ids)
            if texts is not None:
                f.create_dataset("token_text", data=np.array(shaped(texts), dtype=object),
                                 dtype=h5py.string_dtype("utf-8"))
            f.flush()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def apply_rope(x, theta=10000.0, style="half", positions=None):
    """RoPE of x [..., T, D] as kvscope applies it (dump-format.md): token j at position j (or
    ``positions``), pair i turned by position * theta^(-2i/D); 'half' pairs (i, i + D/2) as in
    Hugging Face's rotate_half, 'interleaved' pairs (2i, 2i + 1). Returns float32 numpy."""
    a = _to_numpy(x, "x").astype(np.float64)
    n_tokens, d = a.shape[-2], a.shape[-1]
    if d % 2:
        raise ValueError("apply_rope: head_dim %d is odd" % d)
    pos = np.arange(n_tokens, dtype=np.float64) if positions is None else np.asarray(positions, dtype=np.float64)
    freq = theta ** (-2.0 * np.arange(d // 2, dtype=np.float64) / d)
    angle = pos[:, None] * freq[None, :]
    c, s = np.cos(angle), np.sin(angle)
    if style == "half":
        x0, x1 = a[..., : d // 2], a[..., d // 2:]
        out = np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
    elif style == "interleaved":
        x0, x1 = a[..., 0::2], a[..., 1::2]
        out = np.empty_like(a)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
    else:
        raise ValueError("apply_rope: style %r is not one of %s" % (style, ", ".join(_ROPE_STYLES)))
    return out.astype(np.float32)


class LlamaCapture:
    """Forward hooks that capture each decoder layer's queries and keys before RoPE.

    Hooks ``self_attn.q_proj`` and ``self_attn.k_proj`` of every layer of a Hugging Face
    Llama-family model (``model.model.layers`` or ``model.layers``) and reshapes their outputs
    [B, T, heads*D] to [B, heads, T, D]. Several forward calls (generation) are concatenated
    along T. Use as a context manager so the hooks are removed::

        with LlamaCapture(model) as cap:
            out = model(input_ids, use_cache=True)
        q_pre, k_pre = cap.queries_pre_rope(), cap.keys_pre_rope()
    """

    def __init__(self, model, num_heads=None, num_kv_heads=None, head_dim=None):
        config = getattr(model, "config", None)
        self.num_heads = num_heads or getattr(config, "num_attention_heads", None)
        self.num_kv_heads = num_kv_heads or getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = head_dim or getattr(config, "head_dim", None)
        if self.head_dim is None and config is not None and self.num_heads:
            self.head_dim = config.hidden_size // self.num_heads
        if not (self.num_heads and self.num_kv_heads and self.head_dim):
            raise ValueError("LlamaCapture: give num_heads, num_kv_heads and head_dim (the model has no config)")
        inner = getattr(model, "model", model)
        layers = getattr(inner, "layers", None)
        if layers is None:
            raise ValueError("LlamaCapture: the model has no .model.layers or .layers (not a Llama-family model?)")
        self._layers = list(layers)
        for i, layer in enumerate(self._layers):
            attn = getattr(layer, "self_attn", None)
            if attn is not None and (getattr(attn, "q_norm", None) is not None or getattr(attn, "k_norm", None) is not None):
                # Qwen3, Gemma 3, OLMo 2: q_proj/k_proj's outputs are normalized before RoPE, so
                # the hooks would store keys the cache never holds.
                raise ValueError(
                    f"LlamaCapture: layer {i} normalizes q and k after q_proj/k_proj (q_norm/k_norm), so "
                    "these hooks would capture keys before that norm; for Qwen3 run "
                    "`kvscope-cli record MODEL_FOLDER`, which applies it (docs/real-models.md)")
        self._q = [[] for _ in self._layers]
        self._k = [[] for _ in self._layers]
        self._handles = []

    def __enter__(self):
        for i, layer in enumerate(self._layers):
            attn = layer.self_attn
            self._handles.append(attn.q_proj.register_forward_hook(self._hook(self._q[i], self.num_heads)))
            self._handles.append(attn.k_proj.register_forward_hook(self._hook(self._k[i], self.num_kv_heads)))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        return False

    def _hook(self, store, heads):
        d = self.head_dim

        def hook(_module, _inputs, output):
            b, t = output.shape[0], output.shape[1]
            store.append(output.detach().reshape(b, t, heads, d).transpose(1, 2).float().cpu())
        return hook

    @staticmethod
    def _joined(chunks):
        import torch  # only reached after hooks ran, i.e. with torch present
        return [torch.cat(c, dim=2).numpy() if c else None for c in chunks]

    def queries_pre_rope(self):
        """Per layer [B, H, T, D] float32 numpy, before RoPE."""
        return self._joined(self._q)

    def keys_pre_rope(self):
        """Per layer [B, KVH, T, D] float32 numpy, before RoPE."""
        return self._joined(self._k)
