// SPDX-License-Identifier: GPL-3.0-or-later
// Opening validates the whole layout from metadata alone; data is read later, one layer (and one
// sequence) at a time by hyperslab, so dumps larger than memory open instantly.
#include "core/io/dump.h"
#include "core/util/system.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/io/h5.h"
#include "core/io/isolated_reader.h"
#include "core/util/small_float.h"

namespace kvscope {

NonFiniteReport scanNonFinite(const Tensor3& t) {
  NonFiniteReport r;
  for (int64_t h = 0; h < t.heads; ++h)
    for (int64_t j = 0; j < t.tokens; ++j) {
      const float* row = t.row(h, j);
      for (int64_t d = 0; d < t.dim; ++d) {
        const float x = row[d];
        if (std::isfinite(x)) continue;
        if (std::isnan(x))
          ++r.nanCount;
        else
          ++r.infCount;
        if (r.firstHead < 0) {
          r.firstHead = h;
          r.firstToken = j;
          r.firstChannel = d;
        }
      }
    }
  return r;
}

namespace {

constexpr std::array<TensorKind, 4> kKinds = {TensorKind::Key, TensorKind::Value, TensorKind::Query,
                                              TensorKind::KeyPreRope};

std::string shapeText(const std::vector<hsize_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string gib(double bytes) {
  const double g = bytes / double(int64_t{1} << 30);
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(g >= 100 ? 0 : g >= 1 ? 1 : 3);
  os << g << " GiB";
  return os.str();
}

}  // namespace

/// Where one tensor of every layer lives, and how its axes map onto [head, token, dim].
struct TensorSource {
  std::vector<std::string> paths;  ///< one per layer, or a single stacked dataset
  std::string mappingKey;          ///< "key.path" etc. when read through a mapping
  int layerAxis = -1, batchAxis = -1, headAxis = 0, tokenAxis = 1, dimAxis = 2;
  std::vector<hsize_t> dims;

  [[nodiscard]] const std::string& pathFor(int layer) const {
    return paths.size() == 1 ? paths[0] : paths[static_cast<size_t>(layer)];
  }
  [[nodiscard]] hsize_t extent(int axis) const {
    return axis < 0 ? 1 : dims[static_cast<size_t>(axis)];
  }
  [[nodiscard]] bool inOrder() const { return headAxis < tokenAxis && tokenAxis < dimAxis; }
};

struct Dump::Impl {
  DumpInfo info;
  h5::Id file;
  std::array<std::optional<TensorSource>, 4> sources;
  std::string logitsPath;
  std::vector<hsize_t> logitsDims, tokensDims, tokenTextDims;
  std::shared_ptr<IsolatedReader> reader;  ///< set: every read goes to the reader process

  [[nodiscard]] Status bad(const std::string& what, const std::string& problem) const {
    return Status::invalidData(info.path + ": " + what + ": " + problem);
  }
};

namespace {

using Impl = Dump::Impl;

std::string typeProblem(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return "element type is integer; expected floating point";
    case H5T_STRING:
      return "element type is string; expected floating point";
    case H5T_COMPOUND:
      return "element type is compound; expected floating point";
    case H5T_ENUM:
      return "element type is enum; expected floating point";
    case H5T_ARRAY:
      return "element type is array; expected floating point";
    case H5T_VLEN:
      return "element type is variable-length; expected floating point";
    case H5T_BITFIELD:
      return "element type is bitfield; expected floating point";
    case H5T_OPAQUE:
      return "element type is opaque; expected floating point";
    case H5T_REFERENCE:
      return "element type is a reference; expected floating point";
    default:
      return "element type is not floating point";
  }
}

/// Opens `path` as a dataset and checks storage (links, external, virtual, filters); `suffix`
/// is appended to messages (the mapping key).
Expected<h5::Id> openDataset(const Impl& impl, const OpenOptions& options, const std::string& path,
                             const std::string& suffix) {
  const hid_t f = impl.file.get();
  if (!h5::exists(f, path)) {
    if (!options.allowExternalStorage && !h5::externalLinkOn(f, path).empty())
      return impl.bad(path,
                      "is an external link to another file; refused (pass --allow-external / allow "
                      "external storage to follow it)" +
                          suffix);
    return impl.bad(path, "missing" + suffix);
  }
  if (!options.allowExternalStorage) {
    std::string ext = h5::externalLinkOn(f, path);
    if (!ext.empty())
      return impl.bad(path, (ext == path ? std::string("is") : ext + " is") +
                                " an external link to another file; refused (pass --allow-external "
                                "/ allow external storage to follow it)" +
                                suffix);
  }
  H5O_info_t oinfo{};
  if (H5Oget_info_by_name(f, path.c_str(), &oinfo, H5P_DEFAULT) < 0)
    return impl.bad(path, "cannot be inspected: " + h5::lastErrorText() + suffix);
  if (oinfo.type != H5O_TYPE_DATASET)
    return impl.bad(path,
                    std::string(oinfo.type == H5O_TYPE_GROUP ? "is a group" : "is not a dataset") +
                        ", expected a dataset" + suffix);
  h5::Id ds = h5::datasetId(H5Dopen2(f, path.c_str(), H5P_DEFAULT));
  if (!ds) return impl.bad(path, "cannot be opened: " + h5::lastErrorText() + suffix);
  h5::Id dcpl = h5::plistId(H5Dget_create_plist(ds.get()));
  if (dcpl) {
    H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_VIRTUAL && !options.allowExternalStorage)
      return impl.bad(path,
                      "is a virtual dataset (data in other files); refused (pass --allow-external "
                      "/ allow external storage to read it)" +
                          suffix);
    if (H5Pget_external_count(dcpl.get()) > 0 && !options.allowExternalStorage)
      return impl.bad(path,
                      "stores its data in external raw files; refused (pass --allow-external / "
                      "allow external storage to read it)" +
                          suffix);
    int nfilters = H5Pget_nfilters(dcpl.get());
    for (int i = 0; i < nfilters; ++i) {
      unsigned flags = 0, config = 0;
      size_t nelmts = 0;
      char name[128] = {0};
      H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelmts,
                                       nullptr, sizeof name, name, &config);
      if (id < 0) continue;
      if (H5Zfilter_avail(id) <= 0) {
        std::string shown = "HDF5 filter " + std::to_string(id);
        if (name[0] != '\0') shown += " (" + std::string(name) + ")";
        return Status::unsupported(impl.info.path + ": " + path + ": compressed with " + shown +
                                   ", which this HDF5 library cannot decode (install its plugin or "
                                   "re-save the file without it)" +
                                   suffix);
      }
    }
  }
  return ds;
}

/// "float16" (IEEE half), "bfloat16" (a custom type with bf16's layout), else "float<bits>".
std::string floatTypeName(hid_t type, size_t bits) {
  if (h5::isIeeeHalf(type)) return "float16";
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (bits == 16 && H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 &&
      epos == 7 && esize == 8 && mpos == 0 && msize == 7 && H5Tget_ebias(type) == 127)
    return "bfloat16";
  if (bits == 16) return "float16-custom";
  return "float" + std::to_string(bits);
}

struct DatasetMeta {
  std::vector<hsize_t> dims;
  std::string dtype;
};

/// Checks that a dataset holds floats and returns its shape and element type name.
Expected<DatasetMeta> floatMeta(const Impl& impl, hid_t ds, const std::string& path,
                                const std::string& suffix) {
  h5::Id type = h5::typeId(H5Dget_type(ds));
  if (!type) return impl.bad(path, "cannot read element type" + suffix);
  if (H5Tget_class(type.get()) != H5T_FLOAT)
    return impl.bad(path, typeProblem(type.get()) + suffix);
  h5::Id space = h5::spaceId(H5Dget_space(ds));
  if (H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE)
    return impl.bad(path, "is scalar or empty; expected an array" + suffix);
  DatasetMeta m;
  m.dims = h5::dims(space.get());
  for (size_t i = 0; i < m.dims.size(); ++i)
    if (m.dims[i] == 0)
      return impl.bad(path, "axis " + std::to_string(i) + " has size 0 (shape " +
                                shapeText(m.dims) + ")" + suffix);
  const size_t bits = H5Tget_precision(type.get());
  m.dtype = floatTypeName(type.get(), bits == 0 ? H5Tget_size(type.get()) * 8 : bits);
  return m;
}

/// Reads a scalar numeric attribute (integer or float class); nullopt when absent.
Expected<std::optional<double>> numberAttribute(const Impl& impl, hid_t obj, const char* name,
                                                bool integerOnly) {
  if (H5Aexists(obj, name) <= 0) return std::optional<double>{};
  h5::Id attr = h5::attrId(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return impl.bad(name, "attribute cannot be opened");
  h5::Id type = h5::typeId(H5Aget_type(attr.get()));
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && (integerOnly || cls != H5T_FLOAT))
    return impl.bad(name, std::string("attribute has the wrong type (") +
                              (cls == H5T_STRING  ? "string"
                               : cls == H5T_FLOAT ? "float"
                                                  : "not a number") +
                              "); expected " + (integerOnly ? "an integer" : "a number"));
  h5::Id space = h5::spaceId(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    return impl.bad(name, "attribute must hold exactly one value");
  double v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v) < 0)
    return impl.bad(name, "attribute cannot be read");
  return std::optional<double>{v};
}

/// Reads a one-dimensional numeric attribute; empty when absent.
Expected<std::vector<double>> numberArrayAttribute(const Impl& impl, hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::vector<double>{};
  h5::Id attr = h5::attrId(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return impl.bad(name, "attribute cannot be opened");
  h5::Id type = h5::typeId(H5Aget_type(attr.get()));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return impl.bad(name, "attribute has the wrong type; expected numbers");
  h5::Id space = h5::spaceId(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_ndims(space.get()) > 1) return impl.bad(name, "attribute must be one-dimensional");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 1 || n > (1 << 20)) return impl.bad(name, "attribute must hold between 1 and 2^20 values");
  std::vector<double> v(static_cast<size_t>(n));
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, v.data()) < 0) return impl.bad(name, "attribute cannot be read");
  return v;
}

/// Reads a scalar string attribute (fixed or variable length); nullopt when absent.
Expected<std::optional<std::string>> stringAttribute(const Impl& impl, hid_t obj,
                                                     const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::optional<std::string>{};
  h5::Id attr = h5::attrId(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return impl.bad(name, "attribute cannot be opened");
  h5::Id type = h5::typeId(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING)
    return impl.bad(name, "attribute has the wrong type; expected a string");
  h5::Id space = h5::spaceId(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    return impl.bad(name, "attribute must hold exactly one string");
  std::string out;
  if (H5Tis_variable_str(type.get()) > 0) {
    h5::Id mem = h5::utf8StringType();
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* s = nullptr;
    if (H5Aread(attr.get(), mem.get(), &s) < 0) return impl.bad(name, "attribute cannot be read");
    if (s) out = s;
    H5free_memory(s);
  } else {
    const size_t n = H5Tget_size(type.get());
    std::vector<char> buf(n + 1, '\0');
    if (H5Aread(attr.get(), type.get(), buf.data()) < 0)
      return impl.bad(name, "attribute cannot be read");
    out.assign(buf.data(), strnlen(buf.data(), n));
  }
  return std::optional<std::string>{out};
}

/// Validates one tensor's datasets over all layers and fills `src.dims`.
Status checkSource(const Impl& impl, const OpenOptions& options, TensorSource& src, int layers,
                   const std::string& suffix) {
  std::string firstPath;
  for (size_t i = 0; i < src.paths.size(); ++i) {
    const std::string& path = src.paths[i];
    auto ds = openDataset(impl, options, path, suffix);
    if (!ds) return ds.status();
    auto meta = floatMeta(impl, ds->get(), path, suffix);
    if (!meta) return meta.status();
    if (i == 0) {
      src.dims = meta->dims;
      firstPath = path;
    } else if (meta->dims != src.dims) {
      return impl.bad(path, "shape " + shapeText(meta->dims) + " differs from " + firstPath + " " +
                                shapeText(src.dims) + suffix);
    }
  }
  (void)layers;
  return Status::ok();
}

Status checkMemory(const Impl& impl, const TensorSource& src, int64_t availableBytes) {
  if (availableBytes <= 0) return Status::ok();
  const double elems = double(src.extent(src.headAxis)) * double(src.extent(src.tokenAxis)) *
                       double(src.extent(src.dimAxis));
  const double bytes = elems * 4.0 * (src.inOrder() ? 1.0 : 2.0);
  if (bytes > double(availableBytes))
    return Status::resourceLimit(impl.info.path + ": " + src.pathFor(0) + ": one layer needs " +
                                 gib(bytes) + " as float32, more than the " +
                                 gib(double(availableBytes)) + " of memory available");
  return Status::ok();
}

/// Cross-checks K, V, Q and pre-RoPE K and fills the shape fields of info.
Status checkShapes(Impl& impl, bool canonical) {
  DumpInfo& info = impl.info;
  const TensorSource& k = *impl.sources[0];
  auto describe = [&](TensorKind kind) {
    const TensorSource& s = *impl.sources[static_cast<size_t>(kind)];
    return s.pathFor(0) + (canonical ? "" : " (mapping key '" + s.mappingKey + "')");
  };
  const hsize_t kvh = k.extent(k.headAxis), t = k.extent(k.tokenAxis), d = k.extent(k.dimAxis);
  const hsize_t b = k.extent(k.batchAxis);
  for (TensorKind kind : {TensorKind::Value, TensorKind::KeyPreRope}) {
    const auto& s = impl.sources[static_cast<size_t>(kind)];
    if (!s) continue;
    if (canonical && s->dims.size() != k.dims.size())
      return impl.bad(describe(kind), "has " + std::to_string(s->dims.size()) + " axes but " +
                                          describe(TensorKind::Key) + " has " +
                                          std::to_string(k.dims.size()));
    if (s->extent(s->headAxis) != kvh || s->extent(s->tokenAxis) != t ||
        s->extent(s->dimAxis) != d || s->extent(s->batchAxis) != b)
      return impl.bad(describe(kind), "shape " + shapeText(s->dims) + " does not match " +
                                          describe(TensorKind::Key) + " " + shapeText(k.dims));
  }
  if (const auto& q = impl.sources[static_cast<size_t>(TensorKind::Query)]) {
    if (canonical && q->dims.size() != k.dims.size())
      return impl.bad(describe(TensorKind::Query), "has " + std::to_string(q->dims.size()) +
                                                       " axes but " + describe(TensorKind::Key) +
                                                       " has " + std::to_string(k.dims.size()));
    const hsize_t h = q->extent(q->headAxis), tq = q->extent(q->tokenAxis);
    if (q->extent(q->dimAxis) != d)
      return impl.bad(describe(TensorKind::Query),
                      "head dim " + std::to_string(q->extent(q->dimAxis)) +
                          " differs from the key's " + std::to_string(d));
    if (q->extent(q->batchAxis) != b)
      return impl.bad(describe(TensorKind::Query),
                      "batch size " + std::to_string(q->extent(q->batchAxis)) +
                          " differs from the key's " + std::to_string(b));
    if (h % kvh != 0)
      return impl.bad(describe(TensorKind::Query), "query heads " + std::to_string(h) +
                                                       " is not a multiple of the key's kv heads " +
                                                       std::to_string(kvh));
    if (tq > t)
      return impl.bad(describe(TensorKind::Query), "has " + std::to_string(tq) +
                                                       " queries but the key has only " +
                                                       std::to_string(t) + " tokens");
    info.heads = static_cast<int>(h);
    info.queries = static_cast<int>(tq);
    info.hasQuery = true;
  } else {
    info.heads = static_cast<int>(kvh);
  }
  constexpr hsize_t kIntMax = static_cast<hsize_t>(std::numeric_limits<int>::max());
  if (kvh > kIntMax || t > kIntMax || d > kIntMax || b > kIntMax)
    return impl.bad(describe(TensorKind::Key), "an axis is larger than kvscope supports");
  info.kvHeads = static_cast<int>(kvh);
  info.tokens = static_cast<int>(t);
  info.headDim = static_cast<int>(d);
  info.sequences = static_cast<int>(b);
  info.hasKeyPreRope = impl.sources[static_cast<size_t>(TensorKind::KeyPreRope)].has_value();
  return Status::ok();
}

/// Parses "/layers" member names, which must be 0 … L-1 without gaps.
Expected<int> countLayers(const Impl& impl, const OpenOptions& options) {
  const hid_t f = impl.file.get();
  if (H5Lexists(f, "layers", H5P_DEFAULT) <= 0)
    return impl.bad("/layers", "missing (a dump keeps its tensors in /layers/<l>)");
  H5L_info_t linfo{};
  if (H5Lget_info(f, "layers", &linfo, H5P_DEFAULT) >= 0 && linfo.type == H5L_TYPE_EXTERNAL &&
      !options.allowExternalStorage)
    return impl.bad("/layers",
                    "is an external link to another file; refused (pass --allow-external / allow "
                    "external storage to follow it)");
  H5O_info_t oinfo{};
  if (H5Oget_info_by_name(f, "layers", &oinfo, H5P_DEFAULT) < 0 || oinfo.type != H5O_TYPE_GROUP)
    return impl.bad("/layers", "is not a group");
  h5::Id group = h5::groupId(H5Gopen2(f, "layers", H5P_DEFAULT));
  if (!group) return impl.bad("/layers", "cannot be opened");
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  if (H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect, &names) < 0)
    return impl.bad("/layers", "cannot list its members");
  std::vector<int> numbers;
  for (const auto& name : names) {
    const bool digits =
        !name.empty() && name.size() <= 9 &&
        std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        (name == "0" || name[0] != '0');
    if (!digits)
      return impl.bad("/layers/" + name,
                      "is not a layer number (layers are /layers/0 … /layers/<L-1>)");
    numbers.push_back(std::stoi(name));
  }
  if (numbers.empty()) return impl.bad("/layers", "has no layers");
  std::sort(numbers.begin(), numbers.end());
  for (size_t i = 0; i < numbers.size(); ++i)
    if (numbers[i] != static_cast<int>(i))
      return impl.bad("/layers/" + std::to_string(i),
                      "missing: layer numbers have a gap (found " + std::to_string(numbers.size()) +
                          " layers, the highest is " + std::to_string(numbers.back()) + ")");
  return static_cast<int>(numbers.size());
}

Status openCanonical(Impl& impl, const OpenOptions& options) {
  const hid_t f = impl.file.get();
  DumpInfo& info = impl.info;
  auto version = numberAttribute(impl, f, "kvdump_version", true);
  if (!version) return version.status();
  if (!version->has_value())
    return impl.bad("kvdump_version",
                    "attribute missing: not a canonical dump (read it with a mapping "
                    "file, see docs/mapping.md)");
  if (**version != 1.0)
    return Status::unsupported(info.path + ": kvdump_version: version " +
                               std::to_string(int64_t(**version)) +
                               " is not supported (this kvscope reads version 1)");
  auto model = stringAttribute(impl, f, "model");
  if (!model) return model.status();
  if (*model) info.model = **model;
  auto theta = numberAttribute(impl, f, "rope_theta", false);
  if (!theta) return theta.status();
  if (*theta) {
    if (!(**theta > 0) || !std::isfinite(**theta))
      return impl.bad("rope_theta", "attribute must be a positive number");
    info.ropeTheta = **theta;
  }
  auto style = stringAttribute(impl, f, "rope_style");
  if (!style) return style.status();
  if (*style) {
    if (**style == "half")
      info.ropeStyle = RopeStyle::Half;
    else if (**style == "interleaved")
      info.ropeStyle = RopeStyle::Interleaved;
    else
      return impl.bad("rope_style",
                      "attribute is '" + **style + "'; expected 'half' or 'interleaved'");
  }
  auto scale = numberAttribute(impl, f, "softmax_scale", false);
  if (!scale) return scale.status();
  if (*scale) {
    if (!(**scale > 0) || !std::isfinite(**scale))
      return impl.bad("softmax_scale", "attribute must be a positive number");
    info.softmaxScale = **scale;
  }
  auto modelPath = stringAttribute(impl, f, "model_path");
  if (!modelPath) return modelPath.status();
  if (*modelPath) info.modelPath = **modelPath;
  auto invFreq = numberArrayAttribute(impl, f, "rope_inv_freq");
  if (!invFreq) return invFreq.status();
  for (double v : *invFreq) {
    if (!(v > 0) || !std::isfinite(v))
      return impl.bad("rope_inv_freq", "attribute must hold positive finite numbers (each RoPE pair's inverse frequency)");
  }
  info.ropeInvFreq = std::move(*invFreq);

  auto layers = countLayers(impl, options);
  if (!layers) return layers.status();
  info.layers = *layers;

  for (TensorKind kind : kKinds) {
    const std::string name = tensorKindName(kind);
    const bool required = kind == TensorKind::Key || kind == TensorKind::Value;
    const bool present0 =
        h5::exists(f, "/layers/0/" + name) || !h5::externalLinkOn(f, "/layers/0/" + name).empty();
    TensorSource src;
    for (int l = 0; l < info.layers; ++l) {
      const std::string path = "/layers/" + std::to_string(l) + "/" + name;
      const bool present = h5::exists(f, path) || !h5::externalLinkOn(f, path).empty();
      if (!required && present != present0)
        return impl.bad(present ? "/layers/0/" + name : path,
                        present ? "missing, while " + path +
                                      " exists (optional datasets must be in every layer)"
                                : "missing, while /layers/0/" + name +
                                      " exists (optional datasets must be in every layer)");
      src.paths.push_back(path);
    }
    if (!required && !present0) continue;
    KVS_RETURN_IF_ERROR(checkSource(impl, options, src, info.layers, ""));
    const size_t rank = src.dims.size();
    if (rank != 3 && rank != 4)
      return impl.bad(src.paths[0],
                      "has " + std::to_string(rank) + " axes " + shapeText(src.dims) +
                          "; expected [heads, tokens, dim] or [batch, heads, tokens, dim]");
    const int off = rank == 4 ? 1 : 0;
    src.batchAxis = rank == 4 ? 0 : -1;
    src.headAxis = off;
    src.tokenAxis = off + 1;
    src.dimAxis = off + 2;
    impl.sources[static_cast<size_t>(kind)] = std::move(src);
  }
  KVS_RETURN_IF_ERROR(checkShapes(impl, true));
  if (!info.ropeInvFreq.empty() && static_cast<int>(info.ropeInvFreq.size()) * 2 != info.headDim)
    return impl.bad("rope_inv_freq", "attribute holds " + std::to_string(info.ropeInvFreq.size()) +
                                         " inverse frequencies; a head dim of " + std::to_string(info.headDim) +
                                         " has " + std::to_string(info.headDim / 2) + " RoPE pairs");
  {
    h5::Id ds = h5::datasetId(H5Dopen2(f, "/layers/0/key", H5P_DEFAULT));
    auto meta = floatMeta(impl, ds.get(), "/layers/0/key", "");
    if (meta) info.dtype = meta->dtype;
  }

  // Root extras: tokens, token_text, logits.
  const hsize_t b = static_cast<hsize_t>(info.sequences), t = static_cast<hsize_t>(info.tokens);
  const bool batched = impl.sources[0]->batchAxis >= 0;
  auto rowsMatch = [&](const std::vector<hsize_t>& d, size_t extra) {
    if (d.size() == 1 + extra && !batched) return d[0] == t;
    if (d.size() == 2 + extra) return d[0] == b && d[1] == t;
    return false;
  };
  const std::string expectRows =
      batched ? "[" + std::to_string(b) + ", " + std::to_string(t) : "[" + std::to_string(t);
  if (h5::exists(f, "/tokens")) {
    auto ds = openDataset(impl, options, "/tokens", "");
    if (!ds) return ds.status();
    h5::Id type = h5::typeId(H5Dget_type(ds->get()));
    if (H5Tget_class(type.get()) != H5T_INTEGER)
      return impl.bad("/tokens", "element type is not integer; expected token ids");
    h5::Id space = h5::spaceId(H5Dget_space(ds->get()));
    impl.tokensDims = h5::dims(space.get());
    if (!rowsMatch(impl.tokensDims, 0))
      return impl.bad("/tokens",
                      "shape " + shapeText(impl.tokensDims) + "; expected " + expectRows + "]");
    info.hasTokens = true;
  }
  if (h5::exists(f, "/token_text")) {
    auto ds = openDataset(impl, options, "/token_text", "");
    if (!ds) return ds.status();
    h5::Id type = h5::typeId(H5Dget_type(ds->get()));
    if (H5Tget_class(type.get()) != H5T_STRING)
      return impl.bad("/token_text", "element type is not string");
    h5::Id space = h5::spaceId(H5Dget_space(ds->get()));
    impl.tokenTextDims = h5::dims(space.get());
    if (!rowsMatch(impl.tokenTextDims, 0))
      return impl.bad("/token_text",
                      "shape " + shapeText(impl.tokenTextDims) + "; expected " + expectRows + "]");
    info.hasTokenText = true;
  }
  if (h5::exists(f, "/logits")) {
    auto ds = openDataset(impl, options, "/logits", "");
    if (!ds) return ds.status();
    auto meta = floatMeta(impl, ds->get(), "/logits", "");
    if (!meta) return meta.status();
    if (!rowsMatch(meta->dims, 1))
      return impl.bad("/logits",
                      "shape " + shapeText(meta->dims) + "; expected " + expectRows + ", vocab]");
    impl.logitsDims = meta->dims;
    impl.logitsPath = "/logits";
    info.hasLogits = true;
  }
  return Status::ok();
}

/// Axis index of `name` in a mapping's axes, or -1.
int axisIndex(const std::vector<std::string>& axes, const char* name) {
  auto it = std::find(axes.begin(), axes.end(), name);
  return it == axes.end() ? -1 : static_cast<int>(it - axes.begin());
}

std::string substituteLayer(const std::string& pattern, int layer) {
  std::string out = pattern;
  const std::string token = "{layer}";
  for (size_t pos = out.find(token); pos != std::string::npos; pos = out.find(token, pos))
    out.replace(pos, token.size(), std::to_string(layer));
  return out;
}

std::string normalizedPath(const std::string& p) { return p.empty() || p[0] == '/' ? p : "/" + p; }

Status openMapped(Impl& impl, const OpenOptions& options) {
  const Mapping& m = *options.mapping;
  const std::string origin = m.origin.empty() ? std::string("mapping") : m.origin;
  KVS_RETURN_IF_ERROR(validateMapping(m, origin));
  DumpInfo& info = impl.info;
  info.canonical = false;
  info.model = m.model;
  if (m.ropeTheta) info.ropeTheta = *m.ropeTheta;
  if (m.ropeStyle)
    info.ropeStyle = *m.ropeStyle == "interleaved" ? RopeStyle::Interleaved : RopeStyle::Half;
  if (m.softmaxScale) info.softmaxScale = *m.softmaxScale;
  const hid_t f = impl.file.get();

  std::array<const TensorMapping*, 4> tms = {&m.key, &m.value, m.query ? &*m.query : nullptr,
                                             m.keyPreRope ? &*m.keyPreRope : nullptr};
  int layers = -1;
  std::string layersFrom;
  for (TensorKind kind : kKinds) {
    const TensorMapping* tm = tms[static_cast<size_t>(kind)];
    if (!tm) continue;
    const std::string key = std::string(tensorKindName(kind)) + ".path";
    const std::string suffix = " (mapping " + origin + ", key '" + key + "')";
    TensorSource src;
    src.mappingKey = key;
    src.layerAxis = axisIndex(tm->axes, "layer");
    src.batchAxis = axisIndex(tm->axes, "batch");
    src.headAxis = axisIndex(tm->axes, "head");
    src.tokenAxis = axisIndex(tm->axes, "token");
    src.dimAxis = axisIndex(tm->axes, "dim");
    const std::string pattern = normalizedPath(tm->path);
    int n = 0;
    if (src.layerAxis >= 0) {
      src.paths.push_back(pattern);
    } else if (m.layers) {
      n = *m.layers;
      for (int l = 0; l < n; ++l) src.paths.push_back(substituteLayer(pattern, l));
    } else {
      while (h5::exists(f, substituteLayer(pattern, n)))
        src.paths.push_back(substituteLayer(pattern, n++));
      if (n == 0) return impl.bad(substituteLayer(pattern, 0), "missing" + suffix);
    }
    KVS_RETURN_IF_ERROR(checkSource(impl, options, src, n, suffix));
    if (src.dims.size() != tm->axes.size())
      return impl.bad(src.paths[0], "has " + std::to_string(src.dims.size()) + " axes " +
                                        shapeText(src.dims) + " but the mapping names " +
                                        std::to_string(tm->axes.size()) + " (mapping " + origin +
                                        ", key '" + std::string(tensorKindName(kind)) + ".axes')");
    if (src.layerAxis >= 0) n = static_cast<int>(src.dims[static_cast<size_t>(src.layerAxis)]);
    if (layers < 0) {
      layers = n;
      layersFrom = src.paths[0];
    } else if (n != layers) {
      return impl.bad(src.paths[0], "has " + std::to_string(n) + " layers but " + layersFrom +
                                        " has " + std::to_string(layers) + suffix);
    }
    if (info.dtype.empty()) {
      h5::Id ds = h5::datasetId(H5Dopen2(f, src.paths[0].c_str(), H5P_DEFAULT));
      if (auto meta = floatMeta(impl, ds.get(), src.paths[0], "")) info.dtype = meta->dtype;
    }
    impl.sources[static_cast<size_t>(kind)] = std::move(src);
  }
  info.layers = layers;
  return checkShapes(impl, false);
}

}  // namespace

Dump::Dump(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Dump::~Dump() {
  if (impl_->reader) {
    impl_.reset();  // no HDF5 object here; the reader process closes its own
    return;
  }
  h5::Lock lock;
  impl_.reset();
}

const DumpInfo& Dump::info() const { return impl_->info; }

Expected<std::shared_ptr<const Dump>> Dump::open(const std::string& path,
                                                 const OpenOptions& options) {
  if (!options.isolation.executable.empty()) {
    auto reader = IsolatedReader::start(path, options);
    if (!reader) return reader.status();
    auto impl = std::make_unique<Impl>();
    impl->info = (*reader)->info();
    impl->reader = std::move(*reader);
    return std::shared_ptr<const Dump>(new Dump(std::move(impl)));
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::ioError(path + ": cannot open: no such file");
  if (fs::is_directory(path, ec)) return Status::ioError(path + ": cannot open: is a folder");
  if (::access(path.c_str(), R_OK) != 0)
    return Status::ioError(path + ": cannot open: " + std::strerror(errno));
  h5::Lock lock;
  if (H5Fis_hdf5(path.c_str()) <= 0) return Status::invalidData(path + ": not an HDF5 file");
  auto impl = std::make_unique<Impl>();
  impl->info.path = path;
  // No file locks for reading: a read-only open needs none, and HDF5 1.10's locking fails
  // outright on file systems without flock (some NFS mounts).
  h5::Id fapl = h5::plistId(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_file_locking(fapl.get(), false, true);
  impl->file = h5::fileId(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!impl->file) return Status::ioError(path + ": cannot open: " + h5::lastErrorText());
  Status st = options.mapping ? openMapped(*impl, options) : openCanonical(*impl, options);
  if (!st) return st;
  DumpInfo& info = impl->info;
  if (info.softmaxScale <= 0) info.softmaxScale = 1.0 / std::sqrt(double(info.headDim));
  const int64_t available = memAvailableBytes();
  for (const auto& src : impl->sources)
    if (src) KVS_RETURN_IF_ERROR(checkMemory(*impl, *src, available));
  return std::shared_ptr<const Dump>(new Dump(std::move(impl)));
}

namespace {

/// Reads the hyperslab of one layer and sequence of `src`, heads [firstHead, firstHead + heads)
/// (heads < 0: all of them), into `dest` ([head, token, dim] order, room for every element).
Status readSlabInto(const Impl& impl, const TensorSource& src, int layer, int sequence,
                    float* dest, int64_t firstHead = 0, int64_t heads = -1) {
  const std::string& path = src.pathFor(layer);
  h5::Id ds = h5::datasetId(H5Dopen2(impl.file.get(), path.c_str(), H5P_DEFAULT));
  if (!ds)
    return Status::ioError(impl.info.path + ": " + path + ": cannot open: " + h5::lastErrorText());
  h5::Id fileSpace = h5::spaceId(H5Dget_space(ds.get()));
  const size_t rank = src.dims.size();
  std::vector<hsize_t> start(rank, 0), count = src.dims;
  if (src.layerAxis >= 0) {
    start[static_cast<size_t>(src.layerAxis)] = static_cast<hsize_t>(layer);
    count[static_cast<size_t>(src.layerAxis)] = 1;
  }
  if (src.batchAxis >= 0) {
    start[static_cast<size_t>(src.batchAxis)] = static_cast<hsize_t>(sequence);
    count[static_cast<size_t>(src.batchAxis)] = 1;
  }
  if (heads >= 0) {  // the caller checked the range
    start[static_cast<size_t>(src.headAxis)] = static_cast<hsize_t>(firstHead);
    count[static_cast<size_t>(src.headAxis)] = static_cast<hsize_t>(heads);
  }
  if (H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                          nullptr) < 0)
    return Status::internal(impl.info.path + ": " + path + ": cannot select layer " +
                            std::to_string(layer));
  const int64_t nh = heads >= 0 ? heads : static_cast<int64_t>(src.extent(src.headAxis));
  const int64_t nt = static_cast<int64_t>(src.extent(src.tokenAxis));
  const int64_t nd = static_cast<int64_t>(src.extent(src.dimAxis));
  const hsize_t n = static_cast<hsize_t>(nh * nt * nd);
  h5::Id memSpace = h5::spaceId(H5Screate_simple(1, &n, nullptr));
  h5::Id fileType = h5::typeId(H5Dget_type(ds.get()));

  std::vector<float> staging;
  float* target = dest;
  if (!src.inOrder()) {
    staging.resize(static_cast<size_t>(n));
    target = staging.data();
  }
  herr_t rc;
  if (h5::isIeeeHalf(fileType.get())) {
    // HDF5's generic float conversion is slow for half; read raw bits and convert here.
    h5::Id memType = h5::halfType(H5Tget_order(H5T_NATIVE_UINT16));
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    rc = H5Dread(ds.get(), memType.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, raw.data());
    if (rc >= 0) {
      const int64_t elements = static_cast<int64_t>(raw.size());
      if (elements <= (int64_t{1} << 20)) {
        for (int64_t i = 0; i < elements; ++i)
          target[i] = fp::fp16Value(raw[static_cast<size_t>(i)]);
      } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < elements; ++i)
          target[i] = fp::fp16Value(raw[static_cast<size_t>(i)]);
      }
    }
  } else {
    rc = H5Dread(ds.get(), H5T_NATIVE_FLOAT, memSpace.get(), fileSpace.get(), H5P_DEFAULT, target);
  }
  if (rc < 0)
    return Status::ioError(impl.info.path + ": " + path + ": cannot read layer " +
                           std::to_string(layer) + ": " + h5::lastErrorText());
  if (!src.inOrder()) {
    // Strides of the three kept axes in the order they appear in the file.
    std::array<std::pair<int, int64_t>, 3> order = {
        {{src.headAxis, nh}, {src.tokenAxis, nt}, {src.dimAxis, nd}}};
    std::array<int, 3> byPosition = {0, 1, 2};
    std::sort(byPosition.begin(), byPosition.end(), [&](int a, int b) {
      return order[static_cast<size_t>(a)].first < order[static_cast<size_t>(b)].first;
    });
    std::array<int64_t, 3> stride{};
    int64_t s = 1;
    for (int i = 2; i >= 0; --i) {
      const int which = byPosition[static_cast<size_t>(i)];
      stride[static_cast<size_t>(which)] = s;
      s *= order[static_cast<size_t>(which)].second;
    }
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t t = 0; t < nt; ++t) {
        float* row = dest + (h * nt + t) * nd;
        const int64_t base = h * stride[0] + t * stride[1];
        for (int64_t d = 0; d < nd; ++d)
          row[d] = staging[static_cast<size_t>(base + d * stride[2])];
      }
  }
  return Status::ok();
}

/// [heads, tokens, dim] of one layer's tensor as read().
std::array<int64_t, 3> slabShape(const TensorSource& src) {
  return {static_cast<int64_t>(src.extent(src.headAxis)),
          static_cast<int64_t>(src.extent(src.tokenAxis)),
          static_cast<int64_t>(src.extent(src.dimAxis))};
}

Status readSlab(const Impl& impl, const TensorSource& src, int layer, int sequence, Tensor3& out) {
  const auto shape = slabShape(src);
  out = Tensor3(shape[0], shape[1], shape[2]);
  return readSlabInto(impl, src, layer, sequence, out.data.data());
}

// The source of `kind` when layer and sequence exist; the error names the file and what is wrong.
Expected<const TensorSource*> checkedSource(const Impl& impl, TensorKind kind, int layer, int sequence) {
  const DumpInfo& info = impl.info;
  const auto& src = impl.sources[static_cast<size_t>(kind)];
  if (!src) return Status::invalidArgument(info.path + ": the dump has no " + tensorKindName(kind));
  if (layer < 0 || layer >= info.layers)
    return Status::invalidArgument(info.path + ": layer " + std::to_string(layer) +
                                   " does not exist (0…" + std::to_string(info.layers - 1) + ")");
  if (sequence < 0 || sequence >= info.sequences)
    return Status::invalidArgument(info.path + ": sequence " + std::to_string(sequence) +
                                   " does not exist (0…" + std::to_string(info.sequences - 1) +
                                   ")");
  return &*src;
}

// The source of `kind` when layer, sequence and heads [first, first + count) exist.
Expected<const TensorSource*> checkedHeads(const Impl& impl, TensorKind kind, int layer, int64_t first,
                                           int64_t count, int sequence) {
  auto checked = checkedSource(impl, kind, layer, sequence);
  if (!checked) return checked.status();
  const TensorSource* src = *checked;
  const int64_t heads = static_cast<int64_t>(src->extent(src->headAxis));
  if (count < 1 || first < 0 || first > heads - count)
    return Status::invalidArgument(impl.info.path + ": " + src->pathFor(layer) + ": heads [" + std::to_string(first) +
                                   ", " + std::to_string(first + count) + ") of layer " + std::to_string(layer) +
                                   (count < 1 ? " is an empty range" : " do not exist") + "; the " +
                                   tensorKindName(kind) + " has heads [0, " + std::to_string(heads) + ")");
  return src;
}

}  // namespace

namespace {

// Reads heads [firstHead, firstHead + heads) of a checked source (heads < 0: all of them) into
// caller memory of `capacity` floats; what readInto and readHeadsInto share.
Expected<std::array<int64_t, 3>> readCheckedInto(const Impl& impl, const TensorSource& src, int layer, int sequence,
                                                 int64_t firstHead, int64_t heads, float* out, int64_t capacity) {
  auto shape = slabShape(src);
  if (heads >= 0) shape[0] = heads;
  if (shape[0] * shape[1] * shape[2] > capacity)
    return Status::invalidArgument(impl.info.path + ": " + src.pathFor(layer) + ": the buffer is too small for " +
                                   (heads >= 0 ? "heads of layer " : "layer ") + std::to_string(layer));
  h5::Lock lock;
  try {
    KVS_RETURN_IF_ERROR(readSlabInto(impl, src, layer, sequence, out, firstHead, heads));
  } catch (const std::bad_alloc&) {
    return Status::resourceLimit(impl.info.path + ": " + src.pathFor(layer) + ": not enough memory to read layer " +
                                 std::to_string(layer));
  }
  return shape;
}

}  // namespace

Expected<std::array<int64_t, 3>> Dump::readHeadsInto(int layer, TensorKind kind, int64_t firstHead, int64_t count,
                                                     int sequence, float* out, int64_t capacity) const {
  if (impl_->reader) return impl_->reader->readHeadsInto(layer, kind, firstHead, count, sequence, out, capacity);
  auto checked = checkedHeads(*impl_, kind, layer, firstHead, count, sequence);
  if (!checked) return checked.status();
  return readCheckedInto(*impl_, **checked, layer, sequence, firstHead, count, out, capacity);
}

Expected<Tensor3> Dump::readHeads(int layer, TensorKind kind, int64_t firstHead, int64_t count,
                                  int sequence) const {
  if (impl_->reader) return impl_->reader->readHeads(layer, kind, firstHead, count, sequence);
  auto checked = checkedHeads(*impl_, kind, layer, firstHead, count, sequence);
  if (!checked) return checked.status();
  const auto shape = slabShape(**checked);
  Tensor3 out;
  try {
    out = Tensor3(count, shape[1], shape[2]);
  } catch (const std::bad_alloc&) {
    return Status::resourceLimit(impl_->info.path + ": " + (*checked)->pathFor(layer) +
                                 ": not enough memory to read layer " + std::to_string(layer));
  }
  auto filled = readHeadsInto(layer, kind, firstHead, count, sequence, out.data.data(),
                              static_cast<int64_t>(out.data.size()));
  if (!filled) return filled.status();
  return out;
}

Expected<std::array<int64_t, 3>> Dump::readInto(int layer, TensorKind kind, int sequence,
                                                float* out, int64_t capacity) const {
  if (impl_->reader) return impl_->reader->readInto(layer, kind, sequence, out, capacity);
  auto checked = checkedSource(*impl_, kind, layer, sequence);
  if (!checked) return checked.status();
  return readCheckedInto(*impl_, **checked, layer, sequence, 0, -1, out, capacity);
}

Expected<Tensor3> Dump::read(int layer, TensorKind kind, int sequence) const {
  if (impl_->reader) return impl_->reader->read(layer, kind, sequence);
  const DumpInfo& info = impl_->info;
  auto checked = checkedSource(*impl_, kind, layer, sequence);
  if (!checked) return checked.status();
  const TensorSource* src = *checked;
  h5::Lock lock;
  Tensor3 out;
  try {
    KVS_RETURN_IF_ERROR(readSlab(*impl_, *src, layer, sequence, out));
  } catch (const std::bad_alloc&) {
    return Status::resourceLimit(info.path + ": " + src->pathFor(layer) +
                                 ": not enough memory to read layer " + std::to_string(layer));
  }
  return out;
}

namespace {
constexpr size_t kMaxSequencesListed = size_t{1} << 20;
}  // namespace

Expected<StoredData> Dump::storedData(int layer, TensorKind kind) const {
  if (impl_->reader) return impl_->reader->storedData(layer, kind);
  const DumpInfo& info = impl_->info;
  const auto& src = impl_->sources[static_cast<size_t>(kind)];
  if (!src) return Status::invalidArgument(info.path + ": the dump has no " + tensorKindName(kind));
  if (layer < 0 || layer >= info.layers)
    return Status::invalidArgument(info.path + ": layer " + std::to_string(layer) +
                                   " does not exist (0…" + std::to_string(info.layers - 1) + ")");
  const std::string& path = src->pathFor(layer);
  h5::Lock lock;
  h5::Id ds = h5::datasetId(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT));
  if (!ds)
    return Status::ioError(info.path + ": " + path + ": cannot open: " + h5::lastErrorText());
  StoredData out;
  h5::Id type = h5::typeId(H5Dget_type(ds.get()));
  double declared = double(H5Tget_size(type.get()));
  for (hsize_t d : src->dims) declared *= double(d);
  out.declaredBytes = static_cast<int64_t>(std::min(declared, 9.0e18));
  out.storedBytes = static_cast<int64_t>(H5Dget_storage_size(ds.get()));
  h5::Id dcpl = h5::plistId(H5Dget_create_plist(ds.get()));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CONTIGUOUS) {
    // Allocated as a whole when first written (or never).
    out.everySequence = out.storedBytes > 0;
    return out;
  }
  if (layout != H5D_CHUNKED) return out;  // compact: stored in the object header
  const size_t rank = src->dims.size();
  std::vector<hsize_t> chunk(rank, 0);
  if (H5Pget_chunk(dcpl.get(), static_cast<int>(rank), chunk.data()) != static_cast<int>(rank))
    return Status::invalidData(info.path + ": " + path + ": cannot read the chunk shape");
  double chunks = 1;
  for (size_t i = 0; i < rank; ++i)
    chunks *= std::ceil(double(src->dims[i]) / double(std::max<hsize_t>(chunk[i], 1)));
  out.chunks = static_cast<int64_t>(std::min(chunks, 9.0e18));
  hsize_t stored = 0;
  // HDF5 1.10 wants a real dataspace here (not H5S_ALL); the selection is not used.
  h5::Id space = h5::spaceId(H5Dget_space(ds.get()));
  if (H5Dget_num_chunks(ds.get(), space.get(), &stored) < 0)
    return Status::invalidData(info.path + ": " + path +
                               ": cannot count the stored chunks: " + h5::lastErrorText());
  out.storedChunks = static_cast<int64_t>(stored);
  if (out.storedChunks >= out.chunks) return out;
  // Some chunks were never written. H5Dget_chunk_info walks the chunk index from the start on
  // every call (HDF5 1.10 has no chunk iterator), so only the first kMaxChunksListed are listed.
  out.everySequence = false;
  const hsize_t listed = std::min<hsize_t>(stored, StoredData::kMaxChunksListed);
  out.listTruncated = listed < stored;
  std::vector<int> sequences;
  std::vector<hsize_t> offset(rank, 0);
  for (hsize_t i = 0; i < listed; ++i) {
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    if (H5Dget_chunk_info(ds.get(), space.get(), i, offset.data(), &mask, &addr, &size) < 0)
      return Status::invalidData(info.path + ": " + path + ": cannot read chunk " +
                                 std::to_string(i) + " of the chunk index: " + h5::lastErrorText());
    if (src->layerAxis >= 0) {
      const size_t a = static_cast<size_t>(src->layerAxis);
      if (hsize_t(layer) < offset[a] || hsize_t(layer) >= offset[a] + chunk[a]) continue;
    }
    if (src->batchAxis < 0) {
      sequences.push_back(0);
      continue;
    }
    const size_t b = static_cast<size_t>(src->batchAxis);
    const hsize_t end = std::min<hsize_t>(offset[b] + chunk[b], hsize_t(info.sequences));
    // A compressed chunk may span millions of sequences; the list stays bounded all the same.
    for (hsize_t q = offset[b]; q < end && sequences.size() < kMaxSequencesListed; ++q)
      sequences.push_back(static_cast<int>(q));
    if (sequences.size() >= kMaxSequencesListed) {
      out.listTruncated = true;
      break;
    }
  }
  std::sort(sequences.begin(), sequences.end());
  sequences.erase(std::unique(sequences.begin(), sequences.end()), sequences.end());
  out.sequences = std::move(sequences);
  return out;
}

Expected<std::vector<int64_t>> Dump::tokens(int sequence) const {
  if (impl_->reader) return impl_->reader->tokens(sequence);
  const DumpInfo& info = impl_->info;
  if (!info.hasTokens) return std::vector<int64_t>{};
  if (sequence < 0 || sequence >= info.sequences)
    return Status::invalidArgument(info.path + ": sequence " + std::to_string(sequence) +
                                   " does not exist");
  h5::Lock lock;
  h5::Id ds = h5::datasetId(H5Dopen2(impl_->file.get(), "/tokens", H5P_DEFAULT));
  h5::Id space = h5::spaceId(H5Dget_space(ds.get()));
  const auto& d = impl_->tokensDims;
  std::vector<hsize_t> start(d.size(), 0), count = d;
  if (d.size() == 2) {
    start[0] = static_cast<hsize_t>(sequence);
    count[0] = 1;
  }
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  hsize_t n = d.back();
  h5::Id mem = h5::spaceId(H5Screate_simple(1, &n, nullptr));
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (H5Dread(ds.get(), H5T_NATIVE_INT64, mem.get(), space.get(), H5P_DEFAULT, out.data()) < 0)
    return Status::ioError(info.path + ": /tokens: cannot read: " + h5::lastErrorText());
  return out;
}

Expected<std::vector<std::string>> Dump::tokenText(int sequence) const {
  if (impl_->reader) return impl_->reader->tokenText(sequence);
  const DumpInfo& info = impl_->info;
  if (!info.hasTokenText) return std::vector<std::string>{};
  if (sequence < 0 || sequence >= info.sequences)
    return Status::invalidArgument(info.path + ": sequence " + std::to_string(sequence) +
                                   " does not exist");
  h5::Lock lock;
  h5::Id ds = h5::datasetId(H5Dopen2(impl_->file.get(), "/token_text", H5P_DEFAULT));
  h5::Id space = h5::spaceId(H5Dget_space(ds.get()));
  h5::Id fileType = h5::typeId(H5Dget_type(ds.get()));
  const auto& d = impl_->tokenTextDims;
  std::vector<hsize_t> start(d.size(), 0), count = d;
  if (d.size() == 2) {
    start[0] = static_cast<hsize_t>(sequence);
    count[0] = 1;
  }
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  hsize_t n = d.back();
  h5::Id mem = h5::spaceId(H5Screate_simple(1, &n, nullptr));
  std::vector<std::string> out(static_cast<size_t>(n));
  if (H5Tis_variable_str(fileType.get()) > 0) {
    h5::Id memType = h5::utf8StringType();
    H5Tset_cset(memType.get(), H5Tget_cset(fileType.get()));
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    if (H5Dread(ds.get(), memType.get(), mem.get(), space.get(), H5P_DEFAULT, ptrs.data()) < 0)
      return Status::ioError(info.path + ": /token_text: cannot read: " + h5::lastErrorText());
    for (size_t i = 0; i < ptrs.size(); ++i)
      if (ptrs[i]) out[i] = ptrs[i];
    H5Dvlen_reclaim(memType.get(), mem.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const size_t width = H5Tget_size(fileType.get());
    std::vector<char> buf(static_cast<size_t>(n) * width);
    if (H5Dread(ds.get(), fileType.get(), mem.get(), space.get(), H5P_DEFAULT, buf.data()) < 0)
      return Status::ioError(info.path + ": /token_text: cannot read: " + h5::lastErrorText());
    for (size_t i = 0; i < out.size(); ++i) {
      const char* s = buf.data() + i * width;
      out[i].assign(s, strnlen(s, width));
    }
  }
  return out;
}

Expected<std::vector<float>> Dump::logits(int sequence) const {
  if (impl_->reader) return impl_->reader->logits(sequence);
  const DumpInfo& info = impl_->info;
  if (!info.hasLogits) return Status::invalidArgument(info.path + ": the dump has no /logits");
  if (sequence < 0 || sequence >= info.sequences)
    return Status::invalidArgument(info.path + ": sequence " + std::to_string(sequence) +
                                   " does not exist");
  h5::Lock lock;
  h5::Id ds = h5::datasetId(H5Dopen2(impl_->file.get(), impl_->logitsPath.c_str(), H5P_DEFAULT));
  h5::Id space = h5::spaceId(H5Dget_space(ds.get()));
  const auto& d = impl_->logitsDims;
  std::vector<hsize_t> start(d.size(), 0), count = d;
  if (d.size() == 3) {
    start[0] = static_cast<hsize_t>(sequence);
    count[0] = 1;
  }
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  hsize_t n = d[d.size() - 2] * d.back();
  h5::Id mem = h5::spaceId(H5Screate_simple(1, &n, nullptr));
  std::vector<float> out(static_cast<size_t>(n));
  if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT, out.data()) < 0)
    return Status::ioError(info.path + ": /logits: cannot read: " + h5::lastErrorText());
  return out;
}

}  // namespace kvscope
