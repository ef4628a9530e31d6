// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/io/mapping.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/io/mapping_limits.h"
#include "core/util/atomic_file.h"
#include "core/util/json_text.h"

namespace kvscope {

using nlohmann::json;

namespace {

const std::set<std::string> kAxisNames = {"layer", "batch", "head", "token", "dim"};
const std::set<std::string> kTopKeys = {"key",          "value",      "query",
                                        "key_pre_rope", "layers",     "model",
                                        "rope_theta",   "rope_style", "softmax_scale"};

Status bad(const std::string& origin, const std::string& key, const std::string& problem) {
  return Status::invalidArgument(origin + ": " + key + ": " + problem);
}

std::vector<std::string> splitAxes(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\t') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string joinAxes(const std::vector<std::string>& axes) {
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  return s;
}

Status validateTensor(const TensorMapping& t, const std::string& origin, const std::string& name) {
  if (t.path.empty()) return bad(origin, name + ".path", "empty; expected a dataset path");
  // HDF5 takes paths as C strings: everything after a NUL would be silently dropped.
  if (t.path.find('\0') != std::string::npos)
    return bad(origin, name + ".path", "contains a NUL character (\\u0000); a dataset path cannot");
  const std::string axesKey = name + ".axes";
  std::set<std::string> seen;
  for (const auto& a : t.axes) {
    if (!kAxisNames.count(a))
      return bad(origin, axesKey,
                 "unknown axis '" + a + "' (allowed: layer, batch, head, token, dim)");
    if (!seen.insert(a).second) return bad(origin, axesKey, "axis '" + a + "' appears twice");
  }
  for (const char* required : {"head", "token", "dim"})
    if (!seen.count(required))
      return bad(
          origin, axesKey,
          std::string("must name a '") + required + "' axis (got '" + joinAxes(t.axes) + "')");
  const bool perLayer = t.path.find("{layer}") != std::string::npos;
  if (perLayer && seen.count("layer"))
    return bad(origin, axesKey,
               "names a 'layer' axis but " + name + ".path contains {layer}; use one or the other");
  if (!perLayer && !seen.count("layer"))
    return bad(origin, axesKey,
               "needs a 'layer' axis because " + name +
                   ".path has no {layer} (one dataset then holds all layers)");
  return Status::ok();
}

Expected<TensorMapping> parseTensor(const json& j, const std::string& origin,
                                    const std::string& name) {
  if (!j.is_object()) return bad(origin, name, "expected an object with \"path\" and \"axes\"");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "path" && it.key() != "axes")
      return bad(origin, name + "." + it.key(), "unknown key (allowed: path, axes)");
  TensorMapping t;
  if (!j.contains("path")) return bad(origin, name + ".path", "missing");
  if (!j["path"].is_string()) return bad(origin, name + ".path", "expected a string");
  t.path = j["path"].get<std::string>();
  if (!j.contains("axes"))
    return bad(origin, name + ".axes", "missing (e.g. \"layer,batch,head,token,dim\")");
  const json& axes = j["axes"];
  if (axes.is_string()) {
    t.axes = splitAxes(axes.get<std::string>());
  } else if (axes.is_array()) {
    for (const auto& a : axes) {
      if (!a.is_string()) return bad(origin, name + ".axes", "array entries must be strings");
      t.axes.push_back(a.get<std::string>());
    }
  } else {
    return bad(origin, name + ".axes",
               "expected a string like \"head,token,dim\" or an array of names");
  }
  KVS_RETURN_IF_ERROR(validateTensor(t, origin, name));
  return t;
}

}  // namespace

Status validateMapping(const Mapping& m, const std::string& origin) {
  KVS_RETURN_IF_ERROR(validateTensor(m.key, origin, "key"));
  KVS_RETURN_IF_ERROR(validateTensor(m.value, origin, "value"));
  if (m.query) KVS_RETURN_IF_ERROR(validateTensor(*m.query, origin, "query"));
  if (m.keyPreRope) KVS_RETURN_IF_ERROR(validateTensor(*m.keyPreRope, origin, "key_pre_rope"));
  if (m.layers && (*m.layers <= 0 || *m.layers > kMaxMappingLayers))
    return bad(origin, "layers", "must be an integer from 1 to " + std::to_string(kMaxMappingLayers));
  if (m.ropeStyle && *m.ropeStyle != "half" && *m.ropeStyle != "interleaved")
    return bad(origin, "rope_style", "'" + *m.ropeStyle + "'; expected 'half' or 'interleaved'");
  if (m.ropeTheta && !(*m.ropeTheta > 0))
    return bad(origin, "rope_theta", "must be a positive number");
  if (m.softmaxScale && !(*m.softmaxScale > 0))
    return bad(origin, "softmax_scale", "must be a positive number");
  return Status::ok();
}

Expected<Mapping> parseMapping(const std::string& text, const std::string& origin) {
  auto parsed = parseJsonText(text, origin);
  if (!parsed) return parsed.status();
  json j = std::move(*parsed);
  if (!j.is_object())
    return Status::invalidArgument(origin + ": expected a JSON object at the top level");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kTopKeys.count(it.key()))
      return bad(
          origin, it.key(),
          "unknown key (allowed: key, value, query, key_pre_rope, layers, model, rope_theta, "
          "rope_style, softmax_scale)");
  Mapping m;
  m.origin = origin;
  for (const char* required : {"key", "value"})
    if (!j.contains(required)) return bad(origin, required, "missing (key and value are required)");
  auto key = parseTensor(j["key"], origin, "key");
  if (!key) return key.status();
  m.key = *key;
  auto value = parseTensor(j["value"], origin, "value");
  if (!value) return value.status();
  m.value = *value;
  if (j.contains("query") && !j["query"].is_null()) {
    auto q = parseTensor(j["query"], origin, "query");
    if (!q) return q.status();
    m.query = *q;
  }
  if (j.contains("key_pre_rope") && !j["key_pre_rope"].is_null()) {
    auto k = parseTensor(j["key_pre_rope"], origin, "key_pre_rope");
    if (!k) return k.status();
    m.keyPreRope = *k;
  }
  if (j.contains("layers")) {
    const json& l = j["layers"];
    if (!l.is_number_integer()) return bad(origin, "layers", "expected an integer");
    // Compared as the JSON integer it is: get<int>() would wrap 99999999999 into another count.
    const bool inRange = l.is_number_unsigned() ? l.get<uint64_t>() >= 1 && l.get<uint64_t>() <= kMaxMappingLayers
                                                : l.get<int64_t>() >= 1 && l.get<int64_t>() <= kMaxMappingLayers;
    if (!inRange)
      return bad(origin, "layers", l.dump() + " is out of range (allowed: 1 to " + std::to_string(kMaxMappingLayers) + ")");
    m.layers = static_cast<int>(l.get<int64_t>());
  }
  if (j.contains("model")) {
    if (!j["model"].is_string()) return bad(origin, "model", "expected a string");
    m.model = j["model"].get<std::string>();
  }
  for (auto [name, target] :
       {std::pair<const char*, std::optional<double>*>{"rope_theta", &m.ropeTheta},
        {"softmax_scale", &m.softmaxScale}}) {
    if (!j.contains(name)) continue;
    if (!j[name].is_number()) return bad(origin, name, "expected a number");
    *target = j[name].get<double>();
  }
  if (j.contains("rope_style")) {
    if (!j["rope_style"].is_string()) return bad(origin, "rope_style", "expected a string");
    m.ropeStyle = j["rope_style"].get<std::string>();
  }
  KVS_RETURN_IF_ERROR(validateMapping(m, origin));
  return m;
}

Expected<Mapping> loadMapping(const std::string& path) {
  auto text = readTextFile(path, size_t{1} << 20);
  if (!text) return text.status();
  return parseMapping(*text, path);
}

std::string mappingToJson(const Mapping& m) {
  json j;
  auto tensor = [](const TensorMapping& t) {
    return json{{"path", t.path}, {"axes", joinAxes(t.axes)}};
  };
  j["key"] = tensor(m.key);
  j["value"] = tensor(m.value);
  if (m.query) j["query"] = tensor(*m.query);
  if (m.keyPreRope) j["key_pre_rope"] = tensor(*m.keyPreRope);
  if (m.layers) j["layers"] = *m.layers;
  if (!m.model.empty()) j["model"] = m.model;
  if (m.ropeTheta) j["rope_theta"] = *m.ropeTheta;
  if (m.ropeStyle) j["rope_style"] = *m.ropeStyle;
  if (m.softmaxScale) j["softmax_scale"] = *m.softmaxScale;
  return jsonText(j);
}

}  // namespace kvscope
