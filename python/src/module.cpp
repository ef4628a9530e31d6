// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope._kvscope: the Python module's native half, a thin layer over kvscope_core. Every call
// builds the core's own options from the CLI's strings (core/command), runs core with the GIL
// released, and returns what the CLI's --json prints; python/kvscope/ is the Python face.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/command/diagnose_request.h"
#include "core/command/dump_summary.h"
#include "core/command/eval_request.h"
#include "core/command/search_request.h"
#include "core/command/sensitivity_request.h"
#include "core/command/tensor_spec.h"
#include "core/diagnose/diagnose.h"
#include "core/engine/presets.h"
#include "core/engine/setting.h"
#include "core/io/dump.h"
#include "core/io/dump_writer.h"
#include "core/io/isolated_reader.h"
#include "core/io/mapping.h"
#include "core/quant/format_table.h"
#include "core/quant/plan.h"
#include "core/quant/quantize.h"
#include "core/report/eval.h"
#include "core/report/report_format.h"
#include "core/search/search_format.h"
#include "core/sensitivity/plan_search.h"
#include "core/sensitivity/sensitivity.h"
#include "python/src/binding.h"
#include "python/src/dump_handle.h"

namespace kvscope::python {

extern PyObject* cancelledType;
void bindModel(py::module_& m);  // python/src/model.cpp

namespace {

using FloatArray = py::array_t<float, py::array::c_style>;

// ---- numpy arrays ------------------------------------------------------------------------------

[[noreturn]] void raiseType(const std::string& message) {
  PyErr_SetString(PyExc_TypeError, message.c_str());
  throw py::error_already_set();
}
[[noreturn]] void raiseValue(const std::string& message) {
  PyErr_SetString(PyExc_ValueError, message.c_str());
  throw py::error_already_set();
}

/// `obj` as a C-contiguous numpy array of float32 (or also float16 when `allowHalf`), refusing
/// anything else by name: kvscope never converts silently, so a result is of the array given.
py::array checkedArray(const py::handle& obj, const std::string& what, bool allowHalf) {
  if (!py::isinstance<py::array>(obj)) {
    raiseType(what + ": expected a numpy array, got " + std::string(py::str(obj.get_type().attr("__name__"))) +
              " (a torch tensor: .detach().cpu().float().numpy())");
  }
  py::array a = py::reinterpret_borrow<py::array>(obj);
  const bool isFloat = a.dtype().is(py::dtype::of<float>());
  const bool isHalf = a.dtype().kind() == 'f' && a.dtype().itemsize() == 2;
  if (!isFloat && !(allowHalf && isHalf)) {
    raiseType(what + ": dtype " + std::string(py::str(a.dtype())) + "; kvscope takes float32" +
              (allowHalf ? " or float16" : "") + " arrays (convert with .astype(numpy.float32))");
  }
  if (!(a.flags() & py::array::c_style)) {
    raiseValue(what + ": the array is not C-contiguous (a transposed or sliced view); pass "
                      "numpy.ascontiguousarray(x), or describe its axes with axis_layout=");
  }
  return a;
}

/// The order of [heads, tokens, dim] in an array's axes, from axis_layout ("htd", "thd", "td", …).
struct Layout {
  std::string text;
  int ndim = 3;
  std::array<int, 3> axisOf{0, 1, 2};  ///< axisOf[k]: the array axis of h (k=0), t (1), d (2); -1: absent (h of "td")
};

Layout parseLayout(const std::string& text) {
  Layout l;
  l.text = text;
  l.ndim = static_cast<int>(text.size());
  const std::string letters = "htd";
  bool ok = text.size() == 3 || text.size() == 2;
  l.axisOf = {-1, -1, -1};
  for (size_t i = 0; ok && i < text.size(); ++i) {
    const size_t k = letters.find(text[i]);
    if (k == std::string::npos || l.axisOf[k] != -1) {
      ok = false;
      break;
    }
    l.axisOf[k] = static_cast<int>(i);
  }
  if (!ok || l.axisOf[1] < 0 || l.axisOf[2] < 0) {
    raiseValue("axis_layout '" + text + "': allowed: the axes h (heads), t (tokens), d (head dim) in the "
               "array's order, each once, t and d required: htd (default), thd, hdt, td, …");
  }
  return l;
}

/// Copies `a` (C-contiguous, its axes in `layout`) into [heads, tokens, dim] float32.
Tensor3 tensorFromArray(const py::array& a, const Layout& layout, const std::string& what) {
  if (a.ndim() != layout.ndim) {
    raiseValue(what + ": " + std::to_string(a.ndim()) + " axes, but axis_layout '" + layout.text + "' has " +
               std::to_string(layout.ndim));
  }
  std::array<int64_t, 3> extent{1, 1, 1};
  std::array<int64_t, 3> stride{0, 0, 0};  // in elements
  for (int k = 0; k < 3; ++k) {
    const int axis = layout.axisOf[static_cast<size_t>(k)];
    if (axis < 0) continue;
    extent[static_cast<size_t>(k)] = a.shape(axis);
    stride[static_cast<size_t>(k)] = a.strides(axis) / static_cast<int64_t>(a.itemsize());
  }
  if (extent[0] < 1 || extent[1] < 1 || extent[2] < 1) {
    raiseValue(what + ": an empty array (heads " + std::to_string(extent[0]) + ", tokens " +
               std::to_string(extent[1]) + ", head dim " + std::to_string(extent[2]) + ")");
  }
  Tensor3 t(extent[0], extent[1], extent[2]);
  const bool half = a.itemsize() == 2;
  const bool canonical = stride[2] == 1 && stride[1] == extent[2] && (extent[0] == 1 || stride[0] == extent[1] * extent[2]);
  if (!half && canonical) {
    std::memcpy(t.data.data(), a.data(), t.size() * sizeof(float));
    return t;
  }
  const auto* f32 = static_cast<const float*>(a.data());
  std::vector<float> converted;  // float16 widened by numpy (exact: float16 ⊂ float32), same layout
  if (half) {
    py::array_t<float> wide = a.attr("astype")(py::dtype::of<float>());
    converted.assign(wide.data(), wide.data() + wide.size());
    f32 = converted.data();
  }
  for (int64_t h = 0; h < extent[0]; ++h)
    for (int64_t tk = 0; tk < extent[1]; ++tk)
      for (int64_t d = 0; d < extent[2]; ++d) t.at(h, tk, d) = f32[h * stride[0] + tk * stride[1] + d * stride[2]];
  return t;
}

/// A numpy array owning `t`'s buffer (no copy), laid out as `layout`.
py::array arrayFromTensor(Tensor3&& t, const Layout& layout) {
  const std::array<int64_t, 3> extent{t.heads, t.tokens, t.dim};
  auto* owned = new std::vector<float>(std::move(t.data));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  py::array canonical(py::dtype::of<float>(), std::vector<py::ssize_t>{extent[0], extent[1], extent[2]},
                      owned->data(), owner);
  if (layout.text == "htd") return canonical;
  // The array's axis i holds letter layout.text[i]: transpose, then make it contiguous again.
  py::array view = canonical;
  std::vector<int> order;
  if (layout.ndim == 2) {
    view = canonical.attr("reshape")(extent[1], extent[2]);
    for (char c : layout.text) order.push_back(c == 't' ? 0 : 1);
  } else {
    for (char c : layout.text) order.push_back(c == 'h' ? 0 : c == 't' ? 1 : 2);
  }
  return py::module_::import("numpy").attr("ascontiguousarray")(view.attr("transpose")(order));
}

// ---- strings shared with the CLI ----------------------------------------------------------------

Expected<RopeStyle> parseRopeStyle(const std::string& text, const std::string& flag) {
  if (text == "half") return RopeStyle::Half;
  if (text == "interleaved") return RopeStyle::Interleaved;
  return Status::invalidArgument(flag + " '" + text + "': expected half or interleaved");
}

std::string layersText(const py::object& layers) {
  if (layers.is_none()) return "all";
  if (py::isinstance<py::str>(layers)) return layers.cast<std::string>();
  std::string out;
  for (const py::handle& l : layers) {
    if (!out.empty()) out += ",";
    out += std::to_string(l.cast<long long>());
  }
  return out.empty() ? std::string(",") : out;  // an empty list: --layers's own "empty item" error
}

py::dict storageDict(const StorageCount& s) {
  py::dict d;
  d["payload"] = s.payloadBits;
  d["metadata"] = s.metadataBits;
  d["outliers"] = s.outlierBits;
  d["kept_tokens"] = s.keptBits;
  d["elements"] = s.elements;
  return d;
}

// ---- the dump ----------------------------------------------------------------------------------

DumpHandle openDump(const std::string& path, const py::object& mapping, const std::string& reader,
                    bool allowExternal) {
  OpenOptions options;
  options.allowExternalStorage = allowExternal;
  if (!mapping.is_none()) {
    if (py::isinstance<py::str>(mapping)) {
      options.mapping = valueOr(loadMapping(mapping.cast<std::string>()));
    } else {
      const std::string text = py::module_::import("json").attr("dumps")(mapping).cast<std::string>();
      options.mapping = valueOr(parseMapping(text, "mapping"));
    }
  }
  // The reader process takes libhdf5's crashes on crafted files (core/io/isolated_reader.h);
  // KVSCOPE_ISOLATE_READS=0 or an empty reader reads in this process.
  options.isolation = isolationFromEnvironment(reader);
  options.isolation.cancelled = [] {
    Interrupter* i = Interrupter::current();
    return i != nullptr && i->interrupted();
  };
  Interrupter interrupter;
  DumpHandle h;
  h.dump = runReleased(interrupter, [&] { return Dump::open(path, options); });
  return h;
}

TensorKind kindOf(const std::string& text) {
  for (TensorKind k : {TensorKind::Key, TensorKind::Value, TensorKind::Query, TensorKind::KeyPreRope}) {
    if (text == tensorKindName(k)) return k;
  }
  raise(Status::invalidArgument("--tensor must be key, value, query or key_pre_rope, got '" + text + "'"));
}

py::array readTensor(const DumpHandle& h, int layer, const std::string& kindText, int sequence) {
  const TensorKind kind = kindOf(kindText);
  const DumpInfo& info = h.dump->info();
  const bool query = kind == TensorKind::Query;
  const int64_t heads = query ? info.heads : info.kvHeads;
  const int64_t tokens = query ? info.queries : info.tokens;
  const int64_t dim = info.headDim;
  // Allocated by numpy and filled in place: the one copy is the reader's (shared memory or HDF5).
  FloatArray out({std::max<int64_t>(heads, 1), std::max<int64_t>(tokens, 1), std::max<int64_t>(dim, 1)});
  const int64_t capacity = static_cast<int64_t>(out.size());
  float* data = out.mutable_data();
  Interrupter interrupter;
  const auto shape = runReleased(interrupter, [&] {
    return h.dump->readInto(layer, kind, sequence, data, capacity);
  });
  if (shape[0] != out.shape(0) || shape[1] != out.shape(1) || shape[2] != out.shape(2)) {
    py::array flat = out.attr("reshape")(-1);
    return flat[py::slice(0, shape[0] * shape[1] * shape[2], 1)].attr("reshape")(shape[0], shape[1], shape[2]);
  }
  return out;
}

std::string infoJson(const DumpHandle& h, bool scan, const py::object& progress) {
  Interrupter interrupter(progress);
  auto summary = runReleased(interrupter, [&] { return summarizeDump(*h.dump, scan, interrupter.progress()); });
  return dumpSummaryJson(summary).dump();
}

/// The setting the user gave, resolved for the dump, with its notes (what --explain prints).
py::dict resolveFor(const DumpHandle& h, const std::string& key, const std::string& value, const std::string& preset,
                    const std::string& engine) {
  auto r = valueOr(resolveSetting(SettingText{key, value, preset, engine}, kvShapeOf(h.dump->info())));
  py::dict d;
  d["key"] = toString(r.plans.key);
  d["value"] = toString(r.plans.value);
  d["label"] = r.label;
  d["notes"] = r.strings.notes;
  return d;
}

py::tuple evalJson(const DumpHandle& h, const std::string& key, const std::string& value, const std::string& preset,
                   const std::string& engine, const py::object& layers, int sequence, const std::string& queries,
                   const std::string& nonfinite, const py::object& progress) {
  const DumpInfo& info = h.dump->info();
  EvalRequest request;
  request.setting = SettingText{key, value, preset, engine};
  request.layers = layersText(layers);
  request.sequence = sequence;
  request.queries = queries;
  request.nonfinite = nonfinite;
  auto resolved = valueOr(resolveSetting(request.setting, kvShapeOf(info)));
  auto options = valueOr(evalOptionsFor(request, info, resolved));
  Interrupter interrupter(progress);
  std::string json = runReleased(interrupter, [&]() -> Expected<std::string> {
    auto report = evaluate(*h.dump, options, interrupter.progress());
    if (!report) return report.status();
    return toJson(*report);
  });
  return py::make_tuple(json, resolved.strings.notes);
}

std::string sensitivityJson(const DumpHandle& h, const std::string& candidates, const std::string& side,
                            const py::object& layers, const std::string& queries, int sequence,
                            const py::object& progress) {
  SensitivityRequest request;
  request.candidates = candidates;
  request.side = side;
  request.layers = layersText(layers);
  request.queries = queries;
  request.sequence = sequence;
  auto options = valueOr(sensitivityOptionsFor(request, h.dump->info()));
  Interrupter interrupter(progress);
  return runReleased(interrupter, [&]() -> Expected<std::string> {
    auto map = sensitivityMap(*h.dump, options, interrupter.progress());
    if (!map) return map.status();
    return sensitivityToJson(*map);
  });
}

py::tuple searchJson(const DumpHandle& h, const std::string& keyBudget, const std::string& valueBudget,
                     const std::string& key, const std::string& value, const std::string& candidates, bool perLayer,
                     const py::object& layers, const std::string& queries, int sequence, const std::string& preset,
                     const std::string& engine, bool plan, const py::object& progress) {
  const DumpInfo& info = h.dump->info();
  SearchRequest request;
  request.keyBudget = keyBudget;
  request.valueBudget = valueBudget;
  request.key = key;
  request.value = value;
  request.candidates = candidates;
  request.perLayer = perLayer;
  request.layers = layersText(layers);
  request.queries = queries;
  request.sequence = sequence;
  request.baseline = SettingText{"", "", preset, engine};
  request.plan = plan;
  auto options = valueOr(searchOptionsFor(request, info));
  std::vector<std::string> notes;
  Interrupter interrupter(progress);
  if (plan) {
    auto p = valueOr(planSearchOptionsFor(request, options));
    std::string json = runReleased(interrupter, [&]() -> Expected<std::string> {
      auto result = planSearch(*h.dump, p, interrupter.progress());
      if (!result) return result.status();
      return planSearchToJson(*result);
    });
    return py::make_tuple(json, notes);
  }
  if (!preset.empty() || !engine.empty()) {
    auto base = valueOr(resolveSetting(request.baseline, kvShapeOf(info)));
    check(setSearchBaseline(base, options));
    notes = base.strings.notes;
  }
  std::string json = runReleased(interrupter, [&]() -> Expected<std::string> {
    auto result = searchBudgets(*h.dump, options, interrupter.progress());
    if (!result) return result.status();
    return searchToJson(*result);
  });
  return py::make_tuple(json, notes);
}

std::string diagnoseJson(const DumpHandle& h, const py::object& layers, int sequence, const py::object& progress) {
  DiagnoseRequest request;
  request.layers = layersText(layers);
  request.sequence = sequence;
  auto options = valueOr(diagnoseOptionsFor(request, h.dump->info()));
  Interrupter interrupter(progress);
  return runReleased(interrupter, [&]() -> Expected<std::string> {
    auto dx = diagnose(*h.dump, options, interrupter.progress());
    if (!dx) return dx.status();
    return diagnosisToJson(*dx);
  });
}

// ---- quantize ----------------------------------------------------------------------------------

py::tuple quantize(const py::object& array, const std::string& spec, const std::string& preset,
                   const std::string& engine, const std::string& side, const std::string& axisLayout,
                   const py::object& preRope, double ropeTheta, const std::string& ropeStyle,
                   const std::vector<double>& ropeInvFreq, int layer, int layers, const py::object& progress) {
  const Layout layout = parseLayout(axisLayout);
  const Tensor3 tensor = tensorFromArray(checkedArray(array, "array", false), layout, "array");
  std::optional<Tensor3> pre;
  if (!preRope.is_none()) {
    pre = tensorFromArray(checkedArray(preRope, "pre_rope", false), layout, "pre_rope");
    if (!pre->sameShape(tensor)) raiseValue("pre_rope: its shape differs from the array's");
  }
  if (side != "key" && side != "value") raiseValue("side '" + side + "': allowed: key, value");
  const bool isKey = side == "key";
  const int ways = (spec.empty() ? 0 : 1) + (preset.empty() ? 0 : 1) + (engine.empty() ? 0 : 1);
  if (ways != 1) raiseValue("give exactly one of: spec (a spec or a plan), preset=NAME or engine=\"ENGINE FLAGS\"");
  Plan plan;
  if (!spec.empty()) {
    auto parsed = parsePlan(spec);
    if (!parsed) raise(parsed.status().withContext("--spec"));
    plan = *parsed;
  } else {
    const KvShape shape{static_cast<int>(tensor.dim), layers, static_cast<int>(tensor.heads)};
    auto r = valueOr(resolveSetting(SettingText{"", "", preset, engine}, shape));
    plan = isKey ? r.plans.key : r.plans.value;
  }
  const SpecContext context{isKey, static_cast<int>(tensor.heads), static_cast<int>(tensor.dim), pre.has_value()};
  auto chosen = tensorSpec(plan, layer, layers, context);
  if (!chosen) raise(spec.empty() ? chosen.status() : chosen.status().withContext("--spec"));
  const QuantSpec q = *chosen;
  const RopeStyle style = valueOr(parseRopeStyle(ropeStyle, "rope_style"));
  Interrupter interrupter(progress);
  QuantOutput out = runReleased(interrupter, [&] {
    QuantInput input{&tensor, pre ? &*pre : nullptr, RopeParams{ropeTheta, style, ropeInvFreq}};
    return quantizeTensor(input, q, interrupter.progress());
  });
  py::dict storage = storageDict(out.storage);
  const double bits = out.storage.bitsPerElement();
  return py::make_tuple(arrayFromTensor(std::move(out.reconstruction), layout), storage, toString(q), bits);
}

// ---- write_dump --------------------------------------------------------------------------------

/// A list of per-layer arrays, each [heads, tokens, dim] or [B, heads, tokens, dim].
std::vector<py::array> layerArrays(const py::object& list, const std::string& what) {
  std::vector<py::array> out;
  if (list.is_none()) return out;
  if (py::isinstance<py::array>(list) || !py::isinstance<py::sequence>(list)) {
    raiseType(what + ": expected a list of per-layer arrays ([heads, tokens, dim] or [batch, heads, tokens, dim])");
  }
  size_t i = 0;
  for (const py::handle& item : list) {
    const std::string name = what + "[" + std::to_string(i++) + "]";
    py::array a = checkedArray(item, name, true);
    if (a.ndim() != 3 && a.ndim() != 4) {
      raiseValue(name + ": " + std::to_string(a.ndim()) +
                 " axes; expected [heads, tokens, dim] or [batch, heads, tokens, dim]");
    }
    out.push_back(a);
  }
  return out;
}

/// Sequence `b` of a per-layer array as [heads, tokens, dim].
Tensor3 sequenceOf(const py::array& a, int64_t b, const std::string& what) {
  static const Layout htd = parseLayout("htd");
  if (a.ndim() == 3) return tensorFromArray(a, htd, what);
  py::array one = a[py::int_(b)];
  return tensorFromArray(py::module_::import("numpy").attr("ascontiguousarray")(one), htd, what);
}

void writeDump(const std::string& path, const py::object& keysObj, const py::object& valuesObj,
               const py::object& queriesObj, const py::object& preRopeObj, const py::object& tokens,
               const py::object& tokenText, const std::string& model, const py::object& ropeTheta,
               const py::object& ropeStyle, const py::object& softmaxScale, const std::string& dtype,
               const std::map<std::string, std::string>& attributes, const py::object& progress) {
  const auto keys = layerArrays(keysObj, "keys");
  const auto values = layerArrays(valuesObj, "values");
  const auto queries = layerArrays(queriesObj, "queries");
  const auto preRope = layerArrays(preRopeObj, "key_pre_rope");
  if (keys.empty()) raiseValue("keys: no layers; give one [heads, tokens, dim] array per layer");
  auto sameCount = [&](const std::vector<py::array>& v, const char* what, bool optional) {
    if ((!optional || !v.empty()) && v.size() != keys.size()) {
      raiseValue(std::string(what) + ": " + std::to_string(v.size()) + " layers, but keys has " +
                 std::to_string(keys.size()));
    }
  };
  sameCount(values, "values", false);
  sameCount(queries, "queries", true);
  sameCount(preRope, "key_pre_rope", true);
  const py::array& k0 = keys.front();
  const bool batch = k0.ndim() == 4;
  const int64_t off = batch ? 1 : 0;
  for (const auto* group : {&keys, &values, &queries, &preRope}) {
    for (const py::array& a : *group) {
      if (a.ndim() != k0.ndim()) {
        raiseValue("keys[0] has " + std::to_string(k0.ndim()) + " axes, so every array needs as many; one has " +
                   std::to_string(a.ndim()));
      }
    }
  }
  DumpWriterOptions o;
  o.layers = static_cast<int>(keys.size());
  o.sequences = batch ? static_cast<int>(k0.shape(0)) : 1;
  o.batchAxis = batch;
  o.kvHeads = static_cast<int>(k0.shape(off));
  o.tokens = static_cast<int>(k0.shape(off + 1));
  o.headDim = static_cast<int>(k0.shape(off + 2));
  if (!queries.empty()) {
    o.heads = static_cast<int>(queries.front().shape(off));
    o.queries = static_cast<int>(queries.front().shape(off + 1));
  }
  o.keyPreRope = !preRope.empty();
  o.model = model;
  if (!ropeTheta.is_none()) o.ropeTheta = ropeTheta.cast<double>();
  if (!ropeStyle.is_none()) o.ropeStyle = valueOr(parseRopeStyle(ropeStyle.cast<std::string>(), "rope_style"));
  if (!softmaxScale.is_none()) o.softmaxScale = softmaxScale.cast<double>();
  if (dtype == "float16" || dtype == "fp16") {
    o.dtype = DiskType::Float16;
  } else if (dtype == "float32" || dtype == "fp32") {
    o.dtype = DiskType::Float32;
  } else {
    raiseValue("dtype '" + dtype + "': expected float16 or float32");
  }
  o.stringAttributes = attributes;
  // Token ids [T] or [B, T]; token texts likewise, as lists of str.
  std::vector<std::vector<int64_t>> ids;
  if (!tokens.is_none()) {
    py::array_t<int64_t> t = py::module_::import("numpy").attr("asarray")(tokens, "int64");
    if (t.ndim() == 1) {
      ids.emplace_back(t.data(), t.data() + t.size());
    } else if (t.ndim() == 2) {
      for (py::ssize_t b = 0; b < t.shape(0); ++b) ids.emplace_back(t.data(b, 0), t.data(b, 0) + t.shape(1));
    } else {
      raiseValue("tokens: expected [tokens] or [batch, tokens] token ids");
    }
    o.withTokens = true;
  }
  std::vector<std::vector<std::string>> texts;
  if (!tokenText.is_none()) {
    auto list = tokenText.cast<py::list>();
    if (list.size() > 0 && py::isinstance<py::str>(list[0])) {
      texts.push_back(tokenText.cast<std::vector<std::string>>());
    } else {
      texts = tokenText.cast<std::vector<std::vector<std::string>>>();
    }
    o.withTokenText = true;
  }
  // Every array is copied to float32 before the GIL is released (the writer streams them).
  struct Item {
    std::string name;  ///< e.g. "keys[3]", for errors
    int layer;
    TensorKind kind;
    int sequence;
    Tensor3 tensor;
  };
  std::vector<Item> items;
  auto add = [&](const std::vector<py::array>& group, TensorKind kind, const char* name) {
    for (size_t l = 0; l < group.size(); ++l) {
      const std::string what = std::string(name) + "[" + std::to_string(l) + "]";
      for (int b = 0; b < o.sequences; ++b) {
        items.push_back(Item{what, static_cast<int>(l), kind, b, sequenceOf(group[l], b, what)});
      }
    }
  };
  add(keys, TensorKind::Key, "keys");
  add(values, TensorKind::Value, "values");
  add(queries, TensorKind::Query, "queries");
  add(preRope, TensorKind::KeyPreRope, "key_pre_rope");
  Interrupter interrupter(progress);
  o.cancel = interrupter.progress();
  runReleased(interrupter, [&]() -> Status {
    auto writer = DumpWriter::create(path, o);
    if (!writer) return writer.status();
    for (const Item& it : items) {
      KVS_RETURN_IF_ERROR((*writer)->write(it.layer, it.kind, it.tensor, it.sequence).withContext(it.name));
    }
    for (size_t b = 0; b < ids.size(); ++b)
      KVS_RETURN_IF_ERROR((*writer)->writeTokens(ids[b], static_cast<int>(b)).withContext("tokens"));
    for (size_t b = 0; b < texts.size(); ++b)
      KVS_RETURN_IF_ERROR((*writer)->writeTokenText(texts[b], static_cast<int>(b)).withContext("token_text"));
    return (*writer)->finish();
  });
}

// ---- tables ------------------------------------------------------------------------------------

py::list presetList() {
  py::list out;
  for (const Preset& p : presetTable()) {
    py::dict d;
    d["name"] = std::string(p.name);
    d["key"] = std::string(p.keySpec);
    d["value"] = std::string(p.valueSpec);
    d["description"] = std::string(p.description);
    d["shape_dependent"] = p.rule != nullptr;
    out.append(d);
  }
  return out;
}

const char* formatKindName(FormatKind k) {
  switch (k) {
    case FormatKind::Integer: return "integer";
    case FormatKind::Float8: return "float8";
    case FormatKind::Codebook: return "codebook";
    case FormatKind::Block: return "block";
    case FormatKind::Elementwise: return "elementwise";
    case FormatKind::Vector: return "vector";
    case FormatKind::NonUniform: return "non-uniform";
    case FormatKind::Optimized: return "optimized";
  }
  return "?";
}

py::list formatList() {
  py::list out;
  for (const FormatInfo& f : formatTable()) {
    py::dict d;
    d["name"] = std::string(f.name);
    d["kind"] = formatKindName(f.kind);
    d["default_spec"] = toString(defaultSpec(f.id));
    d["has_bits"] = f.hasBits;
    d["min_bits"] = f.minBits;
    d["max_bits"] = f.maxBits;
    d["description"] = std::string(f.description);
    out.append(d);
  }
  return out;
}

}  // namespace

}  // namespace kvscope::python

PYBIND11_MODULE(_kvscope, m) {
  using namespace kvscope::python;
  namespace kv = kvscope;
  m.doc() = "kvscope's native module: use the kvscope package (python/kvscope) instead";
  m.attr("__version__") = KVSCOPE_VERSION;
  cancelledType = PyErr_NewExceptionWithDoc("kvscope.Cancelled",
                                            "A progress callback returned False, so the work stopped.",
                                            PyExc_Exception, nullptr);
  m.attr("Cancelled") = py::handle(cancelledType);

  py::class_<DumpHandle>(m, "Dump")
      .def("info_json", &infoJson, py::arg("scan") = false, py::arg("progress") = py::none())
      .def("read", &readTensor, py::arg("layer"), py::arg("kind"), py::arg("sequence") = 0)
      .def("tokens",
           [](const DumpHandle& h, int sequence) {
             Interrupter i;
             return runReleased(i, [&] { return h.dump->tokens(sequence); });
           },
           py::arg("sequence") = 0)
      .def("token_text",
           [](const DumpHandle& h, int sequence) {
             Interrupter i;
             return runReleased(i, [&] { return h.dump->tokenText(sequence); });
           },
           py::arg("sequence") = 0)
      .def("resolve", &resolveFor, py::arg("key") = "", py::arg("value") = "", py::arg("preset") = "",
           py::arg("engine") = "")
      .def("eval_json", &evalJson, py::arg("key") = "", py::arg("value") = "", py::arg("preset") = "",
           py::arg("engine") = "", py::arg("layers") = py::none(), py::arg("sequence") = 0,
           py::arg("queries") = "all", py::arg("nonfinite") = "refuse", py::arg("progress") = py::none())
      .def("sensitivity_json", &sensitivityJson, py::arg("candidates") = "default", py::arg("side") = "both",
           py::arg("layers") = py::none(), py::arg("queries") = "all", py::arg("sequence") = 0,
           py::arg("progress") = py::none())
      .def("search_json", &searchJson, py::arg("key_budget") = "", py::arg("value_budget") = "",
           py::arg("key") = "", py::arg("value") = "", py::arg("candidates") = "default",
           py::arg("per_layer") = false, py::arg("layers") = py::none(), py::arg("queries") = "all",
           py::arg("sequence") = 0, py::arg("preset") = "", py::arg("engine") = "", py::arg("plan") = false,
           py::arg("progress") = py::none())
      .def("diagnose_json", &diagnoseJson, py::arg("layers") = py::none(), py::arg("sequence") = 0,
           py::arg("progress") = py::none());

  m.def("open", &openDump, py::arg("path"), py::arg("mapping") = py::none(), py::arg("reader") = "",
        py::arg("allow_external") = false);
  m.def("quantize", &quantize, py::arg("array"), py::arg("spec") = "", py::arg("preset") = "",
        py::arg("engine") = "", py::arg("side") = "key", py::arg("axis_layout") = "htd",
        py::arg("pre_rope") = py::none(), py::arg("rope_theta") = 10000.0, py::arg("rope_style") = "half",
        py::arg("rope_inv_freq") = std::vector<double>{}, py::arg("layer") = 0, py::arg("layers") = 0, py::arg("progress") = py::none());
  m.def("write_dump", &writeDump, py::arg("path"), py::arg("keys"), py::arg("values"),
        py::arg("queries") = py::none(), py::arg("key_pre_rope") = py::none(), py::arg("tokens") = py::none(),
        py::arg("token_text") = py::none(), py::arg("model") = "", py::arg("rope_theta") = py::none(),
        py::arg("rope_style") = py::none(), py::arg("softmax_scale") = py::none(), py::arg("dtype") = "float16",
        py::arg("attributes") = std::map<std::string, std::string>{}, py::arg("progress") = py::none());
  m.def("presets", &presetList);
  m.def("formats", &formatList);
  bindModel(m);
}
