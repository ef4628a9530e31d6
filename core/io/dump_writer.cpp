// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/io/dump_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/io/h5.h"
#include "core/util/atomic_file.h"
#include "core/util/small_float.h"

namespace kvscope {

const char* diskTypeName(DiskType type) { return type == DiskType::Float16 ? "fp16" : "fp32"; }

namespace {

// "812 B", "4.0 KiB", "1.5 GiB".
std::string sizeText(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 5) {
    bytes /= 1024.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

// Refuses a dump that cannot fit on the target's file system before writing a byte, so a typo
// in `synth --tokens` does not fill the disk.
Status checkFreeSpace(const DumpWriterOptions& o, const std::string& path) {
  const double elementBytes = o.dtype == DiskType::Float16 ? 2.0 : 4.0;
  const double kv = double(o.kvHeads) * o.tokens * o.headDim;
  const double perLayer = kv * (o.keyPreRope ? 3 : 2) + double(o.heads) * o.queries * o.headDim;
  const double bytes = (perLayer * o.layers * elementBytes + double(o.tokens) * o.logitsVocab * 4.0) *
                       std::max(1, o.sequences);
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  auto space = std::filesystem::space(parent.empty() ? std::filesystem::path(".") : parent, ec);
  if (ec) return Status::ok();  // cannot tell; the write itself reports a full disk
  if (bytes > static_cast<double>(space.available))
    return Status::resourceLimit(path + ": the dump would need " + sizeText(bytes) + " but only " +
                                 sizeText(static_cast<double>(space.available)) +
                                 " are free there");
  return Status::ok();
}

Status checkOptions(const DumpWriterOptions& o, const std::string& path) {
  auto bad = [&](const std::string& what) { return Status::invalidArgument(path + ": " + what); };
  if (o.layers <= 0 || o.kvHeads <= 0 || o.tokens <= 0 || o.headDim <= 0)
    return bad("layers, kv heads, tokens and head dim must all be positive");
  if (o.sequences <= 0) return bad("sequences must be positive");
  if ((o.heads > 0) != (o.queries > 0))
    return bad("query heads and queries must both be set or both be 0");
  if (o.heads > 0 && o.heads % o.kvHeads != 0)
    return bad("query heads " + std::to_string(o.heads) + " is not a multiple of kv heads " +
               std::to_string(o.kvHeads));
  if (o.queries > o.tokens)
    return bad("queries " + std::to_string(o.queries) + " exceed tokens " +
               std::to_string(o.tokens));
  if (o.logitsVocab < 0) return bad("logits vocabulary size must not be negative");
  if (!o.ropeInvFreq.empty() && static_cast<int64_t>(o.ropeInvFreq.size()) * 2 != o.headDim)
    return bad("rope_inv_freq needs one value per RoPE pair (" + std::to_string(o.headDim / 2) + "), got " +
               std::to_string(o.ropeInvFreq.size()));
  for (const auto& [name, value] : o.stringAttributes) {
    (void)value;
    if (name.empty() || name == "kvdump_version" || name == "model" || name == "rope_theta" ||
        name == "rope_style" || name == "softmax_scale" || name == "rope_inv_freq")
      return bad("extra attribute '" + name + "' is empty or collides with a format attribute");
  }
  return Status::ok();
}

}  // namespace

struct DumpWriter::Impl {
  std::string path;
  std::string tmp;
  DumpWriterOptions o;
  bool batched = false;
  bool finished = false;
  h5::Id file;
  // datasets[layer][kind]; written[layer][kind][sequence]
  std::vector<std::array<h5::Id, 4>> datasets;
  std::vector<std::array<std::vector<bool>, 4>> written;
  h5::Id tokens, tokenText, logits;
  std::vector<bool> tokensWritten, tokenTextWritten, logitsWritten;

  [[nodiscard]] Status bad(const std::string& what, const std::string& problem) const {
    return Status::invalidArgument(path + ": " + what + ": " + problem);
  }
  /// "path: what: problem: detail" on one line; `what` is empty for the file as a whole. Call it
  /// right after the failing HDF5 call: any later call (even closing an id) clears the stack.
  [[nodiscard]] Status ioFail(const std::string& what, const std::string& problem,
                              const std::string& detail) const {
    return Status::ioError(path + ": " + (what.empty() ? "" : what + ": ") + problem +
                           (detail.empty() ? "" : ": " + detail));
  }
  [[nodiscard]] Status ioFail(const std::string& what, const std::string& problem) const {
    return ioFail(what, problem, h5::lastErrorText());
  }
  [[nodiscard]] bool hasKind(TensorKind kind) const {
    if (kind == TensorKind::Query) return o.heads > 0;
    if (kind == TensorKind::KeyPreRope) return o.keyPreRope;
    return true;
  }
  [[nodiscard]] std::vector<hsize_t> shapeOf(TensorKind kind) const {
    std::vector<hsize_t> d;
    if (batched) d.push_back(static_cast<hsize_t>(o.sequences));
    const bool q = kind == TensorKind::Query;
    d.push_back(static_cast<hsize_t>(q ? o.heads : o.kvHeads));
    d.push_back(static_cast<hsize_t>(q ? o.queries : o.tokens));
    d.push_back(static_cast<hsize_t>(o.headDim));
    return d;
  }
  void closeAll() {
    datasets.clear();
    tokens.reset();
    tokenText.reset();
    logits.reset();
    file.reset();
  }
  ~Impl() {
    h5::Lock lock;
    closeAll();
    if (!finished && !tmp.empty()) ::unlink(tmp.c_str());
  }

  Status writeStringAttribute(const char* name, const std::string& value) {
    h5::Id type = h5::utf8StringType();
    h5::Id space = h5::spaceId(H5Screate(H5S_SCALAR));
    h5::Id attr =
        h5::attrId(H5Acreate2(file.get(), name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const char* p = value.c_str();
    if (!attr || H5Awrite(attr.get(), type.get(), &p) < 0)
      return ioFail(name, "cannot write attribute");
    return Status::ok();
  }
  Status writeNumberAttribute(const char* name, hid_t fileType, hid_t memType, const void* value) {
    h5::Id space = h5::spaceId(H5Screate(H5S_SCALAR));
    h5::Id attr =
        h5::attrId(H5Acreate2(file.get(), name, fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    if (!attr || H5Awrite(attr.get(), memType, value) < 0)
      return ioFail(name, "cannot write attribute");
    return Status::ok();
  }
  Expected<h5::Id> createDataset(const std::string& name, hid_t type,
                                 const std::vector<hsize_t>& dims) {
    h5::Id space =
        h5::spaceId(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    h5::Id dcpl = h5::plistId(H5Pcreate(H5P_DATASET_CREATE));
    // Never write fill values: every element is written once by us, and huge dumps stay one pass.
    // (HDF5 refuses "never" for variable-length strings, which are small anyway.)
    if (H5Tis_variable_str(type) <= 0) H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    // No timestamps in object headers: the same content gives the same bytes (synth determinism).
    H5Pset_obj_track_times(dcpl.get(), false);
    h5::Id ds = h5::datasetId(H5Dcreate2(file.get(), name.c_str(), type, space.get(), H5P_DEFAULT,
                                         dcpl.get(), H5P_DEFAULT));
    if (!ds) return ioFail(name, "cannot create dataset");
    return ds;
  }

  Status setUp() {
    h5::Id fcpl = h5::plistId(H5Pcreate(H5P_FILE_CREATE));
    H5Pset_obj_track_times(fcpl.get(), false);  // the root group too
    // Lock while writing where the file system supports it; go on where it does not.
    h5::Id fapl = h5::plistId(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_file_locking(fapl.get(), true, true);
    file = h5::fileId(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()));
    if (!file) return ioFail("", "cannot create temporary file " + tmp);
    const int64_t version = 1;
    KVS_RETURN_IF_ERROR(
        writeNumberAttribute("kvdump_version", H5T_STD_I64LE, H5T_NATIVE_INT64, &version));
    if (!o.model.empty()) KVS_RETURN_IF_ERROR(writeStringAttribute("model", o.model));
    if (o.ropeTheta)
      KVS_RETURN_IF_ERROR(
          writeNumberAttribute("rope_theta", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &*o.ropeTheta));
    if (o.ropeStyle)
      KVS_RETURN_IF_ERROR(writeStringAttribute("rope_style", ropeStyleName(*o.ropeStyle)));
    if (o.softmaxScale)
      KVS_RETURN_IF_ERROR(writeNumberAttribute("softmax_scale", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                               &*o.softmaxScale));
    for (const auto& [name, value] : o.stringAttributes)
      KVS_RETURN_IF_ERROR(writeStringAttribute(name.c_str(), value));
    if (!o.ropeInvFreq.empty()) {
      const hsize_t n = o.ropeInvFreq.size();
      h5::Id space = h5::spaceId(H5Screate_simple(1, &n, nullptr));
      h5::Id attr = h5::attrId(
          H5Acreate2(file.get(), "rope_inv_freq", H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
      if (!attr || H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, o.ropeInvFreq.data()) < 0)
        return ioFail("rope_inv_freq", "cannot write attribute");
    }

    h5::Id gcpl = h5::plistId(H5Pcreate(H5P_GROUP_CREATE));
    H5Pset_obj_track_times(gcpl.get(), false);
    h5::Id layersGroup =
        h5::groupId(H5Gcreate2(file.get(), "layers", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
    if (!layersGroup) return ioFail("/layers", "cannot create group");
    h5::Id elemType = o.dtype == DiskType::Float16 ? h5::halfType(H5T_ORDER_LE)
                                                   : h5::typeId(H5Tcopy(H5T_IEEE_F32LE));
    datasets.resize(static_cast<size_t>(o.layers));
    written.resize(static_cast<size_t>(o.layers));
    for (int l = 0; l < o.layers; ++l) {
      const std::string g = "/layers/" + std::to_string(l);
      h5::Id group =
          h5::groupId(H5Gcreate2(file.get(), g.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
      if (!group) return ioFail(g, "cannot create group");
      for (TensorKind kind :
           {TensorKind::Key, TensorKind::Value, TensorKind::Query, TensorKind::KeyPreRope}) {
        if (!hasKind(kind)) continue;
        auto ds = createDataset(g + "/" + tensorKindName(kind), elemType.get(), shapeOf(kind));
        if (!ds) return ds.status();
        datasets[static_cast<size_t>(l)][static_cast<size_t>(kind)] = std::move(*ds);
        written[static_cast<size_t>(l)][static_cast<size_t>(kind)].assign(
            static_cast<size_t>(o.sequences), false);
      }
    }
    std::vector<hsize_t> rows;
    if (batched) rows.push_back(static_cast<hsize_t>(o.sequences));
    rows.push_back(static_cast<hsize_t>(o.tokens));
    if (o.withTokens) {
      auto ds = createDataset("/tokens", H5T_STD_I64LE, rows);
      if (!ds) return ds.status();
      tokens = std::move(*ds);
      tokensWritten.assign(static_cast<size_t>(o.sequences), false);
    }
    if (o.withTokenText) {
      h5::Id st = h5::utf8StringType();
      auto ds = createDataset("/token_text", st.get(), rows);
      if (!ds) return ds.status();
      tokenText = std::move(*ds);
      tokenTextWritten.assign(static_cast<size_t>(o.sequences), false);
    }
    if (o.logitsVocab > 0) {
      std::vector<hsize_t> d = rows;
      d.push_back(static_cast<hsize_t>(o.logitsVocab));
      auto ds = createDataset("/logits", H5T_IEEE_F32LE, d);
      if (!ds) return ds.status();
      logits = std::move(*ds);
      logitsWritten.assign(static_cast<size_t>(o.sequences), false);
    }
    return Status::ok();
  }

  /// Selects sequence `sequence` (all of it when unbatched) of a dataset; returns the file space.
  h5::Id selectSequence(hid_t ds, int sequence, hsize_t& count) const {
    h5::Id space = h5::spaceId(H5Dget_space(ds));
    std::vector<hsize_t> d = h5::dims(space.get());
    std::vector<hsize_t> start(d.size(), 0);
    if (batched) {
      start[0] = static_cast<hsize_t>(sequence);
      d[0] = 1;
    }
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, d.data(), nullptr);
    count = 1;
    for (hsize_t x : d) count *= x;
    return space;
  }

  Status checkSequence(int sequence, const std::string& what) const {
    if (finished) return bad(what, "the writer is already finished");
    if (!file) return bad(what, "the writer failed earlier");
    if (sequence < 0 || sequence >= o.sequences)
      return bad(what, "sequence " + std::to_string(sequence) + " out of range 0…" +
                           std::to_string(o.sequences - 1));
    return Status::ok();
  }
};

DumpWriter::DumpWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpWriter::~DumpWriter() = default;

const std::string& DumpWriter::path() const { return impl_->path; }

Expected<std::unique_ptr<DumpWriter>> DumpWriter::create(const std::string& path,
                                                         const DumpWriterOptions& options) {
  namespace fs = std::filesystem;
  KVS_RETURN_IF_ERROR(checkOptions(options, path));
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    return Status::invalidArgument(path +
                                   ": exists and is not a regular file; a dump must be a file");
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return Status::ioError(path + ": folder " + parent.string() + " does not exist");
  KVS_RETURN_IF_ERROR(checkFreeSpace(options, path));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->tmp = temporaryPathFor(path);
  impl->o = options;
  impl->batched = options.batchAxis || options.sequences > 1;
  h5::Lock lock;
  Status st = impl->setUp();
  if (!st) return st;  // ~Impl removes the temporary file
  return std::unique_ptr<DumpWriter>(new DumpWriter(std::move(impl)));
}

Status DumpWriter::write(int layer, TensorKind kind, const Tensor3& t, int sequence) {
  Impl& im = *impl_;
  const std::string what = "/layers/" + std::to_string(layer) + "/" + tensorKindName(kind);
  KVS_RETURN_IF_ERROR(im.checkSequence(sequence, what));
  if (layer < 0 || layer >= im.o.layers)
    return im.bad(what, "layer out of range 0…" + std::to_string(im.o.layers - 1));
  if (!im.hasKind(kind)) return im.bad(what, "not declared in the writer's options");
  const bool q = kind == TensorKind::Query;
  const int64_t h = q ? im.o.heads : im.o.kvHeads, n = q ? im.o.queries : im.o.tokens;
  if (t.heads != h || t.tokens != n || t.dim != im.o.headDim ||
      t.data.size() != static_cast<size_t>(h * n * im.o.headDim))
    return im.bad(what, "tensor is [" + std::to_string(t.heads) + ", " + std::to_string(t.tokens) +
                            ", " + std::to_string(t.dim) + "], expected [" + std::to_string(h) +
                            ", " + std::to_string(n) + ", " + std::to_string(im.o.headDim) + "]");
  // Written in blocks of about 1 MiB on disk (whole tokens of one head), asking `cancel` before
  // each: a layer of a long context is tens of MiB, and Ctrl-C should not wait for all of it.
  const bool half = im.o.dtype == DiskType::Float16;
  const int64_t rowBytes = im.o.headDim * (half ? 2 : 4);
  const int64_t rowsPerBlock = std::max<int64_t>(1, (int64_t{1} << 20) / rowBytes);
  const int64_t blocks = h * ((n + rowsPerBlock - 1) / rowsPerBlock);
  std::vector<uint16_t> bits;
  h5::Lock lock;
  const h5::Id& ds = im.datasets[static_cast<size_t>(layer)][static_cast<size_t>(kind)];
  h5::Id fileSpace = h5::spaceId(H5Dget_space(ds.get()));
  h5::Id memType = half ? h5::halfType(H5Tget_order(H5T_NATIVE_UINT16))
                        : h5::typeId(H5Tcopy(H5T_NATIVE_FLOAT));
  int64_t block = 0;
  for (int64_t head = 0; head < h; ++head)
    for (int64_t row = 0; row < n; row += rowsPerBlock, ++block) {
      if (!report(im.o.cancel, double(block) / double(blocks), "writing")) return Status::cancelled();
      const int64_t rows = std::min(rowsPerBlock, n - row);
      std::vector<hsize_t> start = {hsize_t(head), hsize_t(row), 0};
      std::vector<hsize_t> count = {1, hsize_t(rows), hsize_t(im.o.headDim)};
      if (im.batched) {
        start.insert(start.begin(), hsize_t(sequence));
        count.insert(count.begin(), 1);
      }
      H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                          nullptr);
      const hsize_t elements = hsize_t(rows * im.o.headDim);
      h5::Id memSpace = h5::spaceId(H5Screate_simple(1, &elements, nullptr));
      const float* src = t.row(head, row);
      const void* buffer = src;
      if (half) {
        bits.resize(elements);
        for (hsize_t i = 0; i < elements; ++i) bits[i] = fp::fp16Bits(src[i]);
        buffer = bits.data();
      }
      if (H5Dwrite(ds.get(), memType.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT,
                   buffer) < 0)
        return im.ioFail(what, "cannot write", h5::lastErrorText());
    }
  im.written[static_cast<size_t>(layer)][static_cast<size_t>(kind)][static_cast<size_t>(sequence)] =
      true;
  return Status::ok();
}

Status DumpWriter::writeAllSequences(int layer, TensorKind kind,
                                     const std::vector<Tensor3>& perSequence) {
  if (static_cast<int>(perSequence.size()) != impl_->o.sequences)
    return impl_->bad("/layers/" + std::to_string(layer) + "/" + tensorKindName(kind),
                      std::to_string(perSequence.size()) + " tensors given for " +
                          std::to_string(impl_->o.sequences) + " sequences");
  for (size_t b = 0; b < perSequence.size(); ++b)
    KVS_RETURN_IF_ERROR(write(layer, kind, perSequence[b], static_cast<int>(b)));
  return Status::ok();
}

Status DumpWriter::writeTokens(const std::vector<int64_t>& ids, int sequence) {
  Impl& im = *impl_;
  KVS_RETURN_IF_ERROR(im.checkSequence(sequence, "/tokens"));
  if (!im.o.withTokens) return im.bad("/tokens", "not declared in the writer's options");
  if (ids.size() != static_cast<size_t>(im.o.tokens))
    return im.bad("/tokens", std::to_string(ids.size()) + " ids given, expected " +
                                 std::to_string(im.o.tokens));
  h5::Lock lock;
  hsize_t count = 0;
  h5::Id fileSpace = im.selectSequence(im.tokens.get(), sequence, count);
  h5::Id memSpace = h5::spaceId(H5Screate_simple(1, &count, nullptr));
  if (H5Dwrite(im.tokens.get(), H5T_NATIVE_INT64, memSpace.get(), fileSpace.get(), H5P_DEFAULT,
               ids.data()) < 0)
    return im.ioFail("/tokens", "cannot write");
  im.tokensWritten[static_cast<size_t>(sequence)] = true;
  return Status::ok();
}

Status DumpWriter::writeTokenText(const std::vector<std::string>& text, int sequence) {
  Impl& im = *impl_;
  KVS_RETURN_IF_ERROR(im.checkSequence(sequence, "/token_text"));
  if (!im.o.withTokenText) return im.bad("/token_text", "not declared in the writer's options");
  if (text.size() != static_cast<size_t>(im.o.tokens))
    return im.bad("/token_text", std::to_string(text.size()) + " strings given, expected " +
                                     std::to_string(im.o.tokens));
  std::vector<const char*> ptrs;
  ptrs.reserve(text.size());
  for (const auto& s : text) ptrs.push_back(s.c_str());
  h5::Lock lock;
  hsize_t count = 0;
  h5::Id fileSpace = im.selectSequence(im.tokenText.get(), sequence, count);
  h5::Id memSpace = h5::spaceId(H5Screate_simple(1, &count, nullptr));
  h5::Id type = h5::utf8StringType();
  if (H5Dwrite(im.tokenText.get(), type.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT,
               ptrs.data()) < 0)
    return im.ioFail("/token_text", "cannot write");
  im.tokenTextWritten[static_cast<size_t>(sequence)] = true;
  return Status::ok();
}

Status DumpWriter::writeLogits(const std::vector<float>& logits, int sequence) {
  Impl& im = *impl_;
  KVS_RETURN_IF_ERROR(im.checkSequence(sequence, "/logits"));
  if (im.o.logitsVocab <= 0) return im.bad("/logits", "not declared in the writer's options");
  const size_t expected = static_cast<size_t>(im.o.tokens) * static_cast<size_t>(im.o.logitsVocab);
  if (logits.size() != expected)
    return im.bad("/logits", std::to_string(logits.size()) + " values given, expected " +
                                 std::to_string(expected));
  h5::Lock lock;
  hsize_t count = 0;
  h5::Id fileSpace = im.selectSequence(im.logits.get(), sequence, count);
  h5::Id memSpace = h5::spaceId(H5Screate_simple(1, &count, nullptr));
  if (H5Dwrite(im.logits.get(), H5T_NATIVE_FLOAT, memSpace.get(), fileSpace.get(), H5P_DEFAULT,
               logits.data()) < 0)
    return im.ioFail("/logits", "cannot write");
  im.logitsWritten[static_cast<size_t>(sequence)] = true;
  return Status::ok();
}

Status DumpWriter::finish() {
  Impl& im = *impl_;
  if (im.finished) return Status::ok();
  if (!im.file) return Status::invalidArgument(im.path + ": the writer failed earlier");
  auto missing = [&](const std::string& what, const std::vector<bool>& flags) -> Status {
    for (size_t b = 0; b < flags.size(); ++b)
      if (!flags[b])
        return im.bad(what, im.batched ? "sequence " + std::to_string(b) + " was never written"
                                       : "was never written");
    return Status::ok();
  };
  for (int l = 0; l < im.o.layers; ++l)
    for (TensorKind kind :
         {TensorKind::Key, TensorKind::Value, TensorKind::Query, TensorKind::KeyPreRope})
      if (im.hasKind(kind))
        KVS_RETURN_IF_ERROR(missing("/layers/" + std::to_string(l) + "/" + tensorKindName(kind),
                                    im.written[static_cast<size_t>(l)][static_cast<size_t>(kind)]));
  KVS_RETURN_IF_ERROR(missing("/tokens", im.tokensWritten));
  KVS_RETURN_IF_ERROR(missing("/token_text", im.tokenTextWritten));
  KVS_RETURN_IF_ERROR(missing("/logits", im.logitsWritten));
  {
    h5::Lock lock;
    im.datasets.clear();
    im.tokens.reset();
    im.tokenText.reset();
    im.logits.reset();
    // Closing flushes HDF5's cached metadata and chunks: on a full disk this is where it fails.
    if (!im.file.reset()) return im.ioFail("", "cannot write");
  }
  int fd = ::open(im.tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::ioError(im.path + ": temporary file vanished: " + std::strerror(errno));
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) return Status::ioError(im.path + ": cannot flush to disk: " + std::strerror(err));
  if (::rename(im.tmp.c_str(), im.path.c_str()) != 0)
    return Status::ioError(im.path +
                           ": cannot rename temporary file into place: " + std::strerror(errno));
  im.finished = true;
  return Status::ok();
}

}  // namespace kvscope
