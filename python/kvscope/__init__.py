# SPDX-License-Identifier: GPL-3.0-or-later
"""kvscope in Python: open KV dumps, quantize numpy arrays, evaluate, search and sweep corpora.

Every call runs kvscope's C++ core (the native module ``kvscope._kvscope``) with the GIL released,
takes the same spec strings, presets and engine strings as ``kvscope-cli``, returns what the
CLI's ``--json`` prints (as dicts) and fails with the CLI's messages. docs/python.md walks
through it.

    import kvscope
    dump = kvscope.open("model.h5")
    k = dump.key(0)                                   # numpy float32 [kv_heads, tokens, head_dim]
    r = kvscope.quantize(k, "int4,axis=channel,group=32")
    report = dump.eval(preset="kivi-2")               # == kvscope-cli eval --preset kivi-2 --json
    frame = report.to_frame()                         # tidy pandas DataFrame
    result = kvscope.sweep(["a.h5", "b.h5"], ["kivi-2", "llamacpp-q4_0"])   # on Dask
"""

import collections
import os

from . import _kvscope as _native
from ._kvscope import Cancelled
from ._report import Report, Result

__version__ = _native.__version__
__all__ = ["open", "Dump", "Shape", "Report", "Result", "Quantized", "Cancelled", "quantize", "write_dump", "presets",
           "formats", "record", "e2e", "sweep", "SweepResult", "__version__"]

Shape = collections.namedtuple("Shape", "layers kv_heads heads tokens queries head_dim sequences")
Shape.__doc__ = "A dump's shape: L, KVH, H (query heads), T, Tq (queries), D, B (sequences)."

Quantized = collections.namedtuple("Quantized", "reconstruction storage spec bits_per_element")
Quantized.__doc__ = ("quantize()'s result: the reconstruction (numpy, the input's shape and layout), the storage "
                     "in bits (payload, metadata, outliers, kept_tokens, elements: eval's storage_bits), the "
                     "canonical spec and its bits per element.")


def _reader():
    """kvscope-cli, whose reader mode parses dumps in a separate process (a crafted file that
    crashes libhdf5 then raises instead of ending Python): $KVSCOPE_CLI, else the build's or the
    installation's."""
    env = os.environ.get("KVSCOPE_CLI")
    if env:
        return env
    from . import _config
    if _config.READER:
        return _config.READER
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), _config.READER_RELATIVE))


def _text(value):
    return "" if value is None else str(value)


def open(path, mapping=None, *, allow_external=False):  # noqa: A001 - the module's verb, like builtins.open
    """Opens a dump (metadata only; tensors are read when asked for).

    mapping: a mapping file's path or its content as a dict, for a non-canonical HDF5 file
    (docs/mapping.md). The file is parsed by a kvscope-cli reader process (see _reader); set
    KVSCOPE_ISOLATE_READS=0 to read in this process instead. Raises OSError for a missing or
    unreadable file and ValueError for one that breaks the dump format, with the CLI's message.
    """
    path = os.fspath(path)
    reader = _reader()
    if os.environ.get("KVSCOPE_ISOLATE_READS", "1") != "0" and not os.access(reader, os.X_OK):
        raise OSError("kvscope-cli, which reads dumps in a separate process, is not at %s: build it "
                      "(cmake --build --preset release), set KVSCOPE_CLI to its path, or set "
                      "KVSCOPE_ISOLATE_READS=0 to read in this process" % reader)
    handle = _native.open(path, mapping, reader, allow_external)
    return Dump(handle, path, mapping, allow_external)


class Dump:
    """An open dump. Tensor reads and evaluations run in kvscope's core; one Dump may be used from
    several threads. Pickles as its path (a Dask worker reopens it)."""

    def __init__(self, handle, path, mapping=None, allow_external=False):
        self._handle = handle
        self._open_args = (path, mapping, allow_external)
        self.path = path
        self.info = _native_json(handle.info_json())
        i = self.info
        self.shape = Shape(i["layers"], i["kv_heads"], i["heads"], i["tokens"], i["queries"], i["head_dim"],
                           i["sequences"])

    def __reduce__(self):
        path, mapping, allow_external = self._open_args
        return (_reopen, (path, mapping, allow_external))

    def __repr__(self):
        s = self.shape
        return "<kvscope.Dump %r: %d layers, %d kv heads, %d heads, %d tokens, %d queries, head dim %d>" % (
            self.path, s.layers, s.kv_heads, s.heads, s.tokens, s.queries, s.head_dim)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Ends the reader process now (it also ends when the Dump is garbage collected)."""
        self._handle = None

    @property
    def _h(self):
        if self._handle is None:
            raise ValueError("%s: the dump was closed" % self.path)
        return self._handle

    # ---- metadata ----
    @property
    def layers(self):
        """L."""
        return self.shape.layers

    @property
    def attributes(self):
        """The root attributes kvscope reads (model, rope_theta, rope_style, softmax_scale, model_path, and
        rope_inv_freq when the dump has it)."""
        i = self.info
        keys = ("model", "rope_theta", "rope_style", "rope_inv_freq", "softmax_scale", "model_path")
        return {k: i[k] for k in keys if k in i}

    @property
    def tokens(self):
        """Token ids of sequence 0 (empty when the dump has none); token_ids(b) for another."""
        return self.token_ids(0)

    def token_ids(self, sequence=0):
        """Token ids of one sequence (empty when the dump has none)."""
        return self._h.tokens(sequence)

    def token_text(self, sequence=0):
        """Token texts of one sequence (empty when the dump has none)."""
        return self._h.token_text(sequence)

    def scan(self, progress=None):
        """`info --scan`: info with every tensor's NaN/Inf counts (reads the whole dump)."""
        return _native_json(self._h.info_json(True, progress))

    # ---- tensors: numpy float32 [heads, tokens, head_dim], exactly what `kvscope-cli read` writes ----
    def read(self, layer, tensor="key", sequence=0):
        """One layer tensor: tensor is key, value, query or key_pre_rope."""
        return self._h.read(layer, tensor, sequence)

    def key(self, layer, sequence=0):
        """Keys of a layer (after RoPE), [kv_heads, tokens, head_dim]."""
        return self._h.read(layer, "key", sequence)

    def value(self, layer, sequence=0):
        """Values of a layer, [kv_heads, tokens, head_dim]."""
        return self._h.read(layer, "value", sequence)

    def query(self, layer, sequence=0):
        """Queries of a layer (after RoPE), [heads, queries, head_dim]."""
        return self._h.read(layer, "query", sequence)

    def key_pre_rope(self, layer, sequence=0):
        """Keys of a layer before RoPE, [kv_heads, tokens, head_dim]."""
        return self._h.read(layer, "key_pre_rope", sequence)

    # ---- the CLI's commands ----
    def resolve(self, key=None, value=None, preset=None, engine=None):
        """What a setting stores for this dump (`--explain`): {key, value, label, notes}."""
        return self._h.resolve(_text(key), _text(value), _text(preset), _text(engine))

    def eval(self, key=None, value=None, preset=None, engine=None, plan=None, *, layers=None, sequence=0,
             queries="all", nonfinite="refuse", progress=None):
        """`kvscope-cli eval --json`: quantize K and V and measure the damage; returns a Report (a
        dict equal to the CLI's JSON, with .to_frame()).

        Give key= and value= (specs or plans), preset=, engine= (e.g. "llama.cpp -ctk q4_0"), or
        plan= (a dict with "key_plan"/"value_plan" as search(plan=True) returns, or "key"/"value").
        layers: "all", "0,2,5-7" or a list of ints; queries: "all" or "last:N"; nonfinite: "refuse"
        or "skip-heads". progress(fraction, what) is called about 10 times a second; returning False
        stops the work (raises kvscope.Cancelled), and Ctrl-C raises KeyboardInterrupt.
        """
        if plan is not None:
            if key is not None or value is not None:
                raise ValueError("give plan= or key=/value=, not both")
            key = plan.get("key_plan", plan.get("key"))
            value = plan.get("value_plan", plan.get("value"))
            if key is None or value is None:
                raise ValueError("plan=: expected a dict with key_plan and value_plan (search(plan=True)'s result, "
                                 "found) or key and value")
        text, notes = self._h.eval_json(_text(key), _text(value), _text(preset), _text(engine), layers, sequence,
                                        queries, nonfinite, progress)
        report = Report(_native_json(text))
        report.setting_notes = list(notes)
        return report

    def sensitivity(self, candidates="default", side="both", *, layers=None, queries="all", sequence=0,
                    progress=None):
        """`kvscope-cli sensitivity --json`: per layer, kv head and side, each candidate's damage.
        candidates: "default", "search", a file of specs, "SPEC;SPEC;…" or a list of specs."""
        if not isinstance(candidates, str):
            candidates = ";".join(candidates)
        return _native_json(self._h.sensitivity_json(candidates, side, layers, queries, sequence, progress))

    def search(self, key_budget=None, value_budget=None, *, key=None, value=None, candidates="default",
               per_layer=False, layers=None, queries="all", sequence=0, preset=None, engine=None, plan=False,
               progress=None):
        """`kvscope-cli search --json`: the cheapest K and V specs within budgets ("kl_mean=1e-3");
        plan=True: the cheapest plan (a spec per layer), engine= then names the engine it must fit."""
        text, notes = self._h.search_json(_text(key_budget), _text(value_budget), _text(key), _text(value),
                                          candidates, per_layer, layers, queries, sequence, _text(preset),
                                          _text(engine), plan, progress)
        result = Result(_native_json(text))
        result.setting_notes = list(notes)
        return result

    def diagnose(self, *, layers=None, sequence=0, progress=None):
        """`kvscope-cli diagnose --json`: findings that predict how a quantizer fails on this dump."""
        return _native_json(self._h.diagnose_json(layers, sequence, progress))


def _reopen(path, mapping, allow_external):
    return open(path, mapping, allow_external=allow_external)


def _native_json(text):
    import json
    return json.loads(text)


def quantize(array, spec=None, *, preset=None, engine=None, side="key", axis_layout="htd", pre_rope=None,
             rope_theta=10000.0, rope_style="half", rope_inv_freq=None, layer=0, layers=0, progress=None):
    """Quantizes one layer tensor and returns Quantized(reconstruction, storage, spec, bits_per_element).

    array: numpy float32, C-contiguous, its axes named by axis_layout: "htd" (default: [heads,
    tokens, head_dim], as dumps hold them), "thd", "td" (one head), …; the reconstruction has the
    same shape and layout. spec: any spec or plan kvscope-cli takes ("q4_0", "int2,axis=channel,
    group=32,residual=128"), or preset=/engine= with side="key"|"value" for that side's spec. A plan
    with per-layer specs needs layer= and layers=. A `prerope` spec needs pre_rope= (the keys before
    RoPE, same shape) and the dump's rope_theta/rope_style (and rope_inv_freq when it has one:
    dump.attributes gives all three). The result equals `kvscope-cli read
    --spec` of the same tensor bit for bit.
    """
    recon, storage, canonical, bits = _native.quantize(array, _text(spec), _text(preset), _text(engine), side,
                                                       axis_layout, pre_rope, rope_theta, rope_style,
                                                       list(rope_inv_freq or []), layer, layers, progress)
    return Quantized(recon, storage, canonical, bits)


def write_dump(path, keys, values, queries=None, tokens=None, *, key_pre_rope=None, token_text=None, model="",
               rope_theta=None, rope_style=None, softmax_scale=None, dtype="float16", progress=None, **attrs):
    """Writes a canonical dump (dump-format.md) atomically: nothing appears at `path` unless all of it
    was written.

    keys, values (and optionally queries, key_pre_rope): one numpy array per layer, float32 or
    float16, C-contiguous, [kv_heads, tokens, head_dim] ([heads, queries, head_dim] for queries), or
    with a leading batch axis. tokens: ids [T] or [B, T]; token_text: [T] strings or one list per
    sequence. dtype: "float16" (default) or "float32" on disk. Other keyword arguments are written as
    string attributes (e.g. model_path="…").
    """
    extra = {}
    for name, v in attrs.items():
        if not isinstance(v, str):
            raise TypeError("%s=: extra attributes are strings; got %s" % (name, type(v).__name__))
        extra[name] = v
    _native.write_dump(os.fspath(path), keys, values, queries, key_pre_rope, tokens, token_text, model, rope_theta,
                       rope_style, softmax_scale, dtype, extra, progress)


def presets():
    """The preset table (`kvscope-cli presets`): name, key, value, description, shape_dependent."""
    return _native.presets()


def formats():
    """The format table: name, kind, default_spec, has_bits, min_bits, max_bits, description."""
    return _native.formats()


def record(model, out, tokens=None, *, text=None, prompt_tokens=None, steps=None, seed=0, temperature=0.0,
           tokenizer=None, logits=False, progress=None):
    """`kvscope-cli record`: runs a model (a GGUF file, a Hugging Face folder or a llama2.c
    checkpoint) over an input and writes its keys, values and queries as a dump at `out`; returns
    it opened.

    The input: tokens= (exactly these ids), text= (tokenized with the model's tokenizer, BOS as the
    model says) or prompt_tokens= (after BOS, llama2.c style); with none, BOS alone. steps: positions
    in the dump, the input included, sampled beyond it (default: the input alone; with no input,
    256 or the model's context). tokenizer: llama2.c's tokenizer.bin for token texts. logits: also
    store /logits."""
    _native.record(os.fspath(model), os.fspath(out), None if tokens is None else [int(t) for t in tokens], text,
                   [int(t) for t in (prompt_tokens or [])], steps, seed, temperature, _text(tokenizer), logits,
                   progress)
    return open(out)


def e2e(model, dump, key=None, value=None, preset=None, engine=None, *, score_from=0, progress=None):
    """`kvscope-cli e2e --json`: replays a recorded dump's tokens through the model with the KV cache
    stored under the setting, and measures the damage to the next-token distribution."""
    if not isinstance(dump, Dump):
        dump = open(dump)
    return _native_json(_native.e2e(os.fspath(model), dump._h, _text(key), _text(value), _text(preset),
                                    _text(engine), score_from, progress))


def sweep(dumps, settings, client=None, **options):
    """Evaluates every (dump, setting) as a Dask task; see kvscope._sweep.sweep."""
    from ._sweep import sweep as run
    return run(dumps, settings, client, **options)


def __getattr__(name):
    if name == "SweepResult":
        from ._sweep import SweepResult
        return SweepResult
    raise AttributeError("module 'kvscope' has no attribute %r" % name)
