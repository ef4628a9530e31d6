// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF reader. Layout (ggml docs/gguf.md; ggml/src/gguf.cpp, gguf_init_from_reader, for what
// llama.cpp accepts): "GGUF", u32 version, i64 tensor count, i64 metadata count; each entry a
// string key (u64 length + bytes), an i32 value type and the value (an array: i32 element type,
// u64 count, the elements); each tensor info a string name, u32 n_dims, i64 dims, i32 ggml type,
// u64 offset; then padding to `general.alignment` and the data section. Little-endian.
#include "core/modelfile/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "core/util/utf8.h"

static_assert(std::endian::native == std::endian::little, "GGUF numbers are read in place as little-endian");

namespace kvscope {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

/// Size in bytes of a fixed-size value type; 0 for str and arr.
uint64_t fixedSize(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::String:
    case GgufType::Array: return 0;
  }
  return 0;
}

bool knownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Printable rendering of up to 4 magic bytes.
std::string magicText(const uint8_t* p, size_t n) {
  std::string s = "'";
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    }
  }
  return s + "'";
}

}  // namespace

const char* ggufTypeName(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "str";
    case GgufType::Array: return "arr";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "?";
}

bool isGgufInteger(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64: return true;
    case GgufType::F32:
    case GgufType::F64:
    case GgufType::Bool:
    case GgufType::String:
    case GgufType::Array: return false;
  }
  return false;
}

std::string GgufValue::typeName() const {
  return array_ ? std::string("array of ") + ggufTypeName(element_) : std::string(ggufTypeName(element_));
}

std::optional<int64_t> GgufValue::integerAt(uint64_t i) const {
  if (i >= count_ || data_ == nullptr) return std::nullopt;
  const uint8_t* p = data_ + i * fixedSize(element_);
  switch (element_) {
    case GgufType::U8: return load<uint8_t>(p);
    case GgufType::I8: return load<int8_t>(p);
    case GgufType::U16: return load<uint16_t>(p);
    case GgufType::I16: return load<int16_t>(p);
    case GgufType::U32: return load<uint32_t>(p);
    case GgufType::I32: return load<int32_t>(p);
    case GgufType::I64: return load<int64_t>(p);
    case GgufType::U64: {
      const auto v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    case GgufType::F32:
    case GgufType::F64:
    case GgufType::Bool:
    case GgufType::String:
    case GgufType::Array: break;
  }
  return std::nullopt;
}

std::optional<double> GgufValue::numberAt(uint64_t i) const {
  if (i >= count_ || data_ == nullptr) return std::nullopt;
  const uint8_t* p = data_ + i * fixedSize(element_);
  switch (element_) {
    case GgufType::F32: return static_cast<double>(load<float>(p));
    case GgufType::F64: return load<double>(p);
    case GgufType::U64: return static_cast<double>(load<uint64_t>(p));
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::I64: return static_cast<double>(*integerAt(i));
    case GgufType::Bool:
    case GgufType::String:
    case GgufType::Array: break;
  }
  return std::nullopt;
}

bool GgufValue::boolAt(uint64_t i) const {
  return element_ == GgufType::Bool && i < count_ && data_ != nullptr && data_[i] != 0;
}

std::string_view GgufValue::stringAt(uint64_t i) const {
  return element_ == GgufType::String && i < strings_.size() ? strings_[static_cast<size_t>(i)] : std::string_view{};
}

// ---- the parser ------------------------------------------------------------------------------

/// Reads a mapping front to back; every read first checks that its bytes are there.
class GgufParser {
 public:
  explicit GgufParser(std::shared_ptr<const MappedFile> file)
      : file_(std::move(file)), p_(file_->bytes().data()), size_(file_->size()) {}

  Expected<std::shared_ptr<const GgufFile>> run();

 private:
  /// "path: context: problem".
  Status bad(const std::string& context, const std::string& problem) const {
    return Status::invalidData(file_->path() + ": " + (context.empty() ? problem : context + ": " + problem));
  }
  uint64_t left() const { return size_ - pos_; }
  // `what` is a string literal or a callable giving the item's description: messages are built
  // only on failure, so reading a vocabulary of 150,000 strings builds no strings.
  template <typename What>
  static std::string describe(const What& what) {
    if constexpr (std::is_invocable_v<const What&>) {
      return what();
    } else {
      return std::string(what);
    }
  }
  /// A truncation error unless n bytes remain.
  template <typename What>
  Status need(uint64_t n, const std::string& context, const What& what) const {
    if (left() >= n) return Status::ok();
    return bad(context, "the file ends at byte " + std::to_string(size_) + " while reading " + describe(what) + " at byte " +
                            std::to_string(pos_) + " (" + std::to_string(n) + " bytes needed, " +
                            std::to_string(left()) + " left): truncated?");
  }
  template <typename T, typename What>
  Status read(T& v, const std::string& context, const What& what) {
    KVS_RETURN_IF_ERROR(need(sizeof(T), context, what));
    v = load<T>(p_ + pos_);
    pos_ += sizeof(T);
    return Status::ok();
  }
  /// A u64 length, then that many bytes of valid UTF-8, as a view into the mapping.
  template <typename What>
  Status readString(std::string_view& s, const std::string& context, const What& what) {
    uint64_t len = 0;
    KVS_RETURN_IF_ERROR(read(len, context, [&] { return "the length of " + describe(what); }));
    if (len > left())
      return bad(context, describe(what) + " has length " + std::to_string(len) + " at byte " + std::to_string(pos_ - 8) +
                              ", more than the " + std::to_string(left()) + " bytes left in the file");
    s = std::string_view(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    const size_t valid = validUtf8Prefix(s);
    if (valid != s.size())
      return bad(context, describe(what) + " is not valid UTF-8 (byte " + std::to_string(valid) + " of " +
                              std::to_string(len) + ", at file offset " + std::to_string(pos_ + valid) + ")");
    pos_ += len;
    return Status::ok();
  }
  Status readValue(GgufValue& v, const std::string& context);
  Status readTensorInfo(GgufTensorInfo& t, size_t index, uint64_t total);

  std::shared_ptr<const MappedFile> file_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Status GgufParser::readValue(GgufValue& v, const std::string& context) {
  uint32_t type = 0;
  KVS_RETURN_IF_ERROR(read(type, context, "the value type"));
  if (!knownType(type)) return bad(context, "invalid GGUF value type " + std::to_string(type) + " (0-12 exist)");
  v.element_ = static_cast<GgufType>(type);
  if (v.element_ == GgufType::Array) {
    v.array_ = true;
    uint32_t element = 0;
    KVS_RETURN_IF_ERROR(read(element, context, "the array's element type"));
    if (!knownType(element))
      return bad(context, "invalid GGUF array element type " + std::to_string(element) + " (0-12 exist)");
    if (static_cast<GgufType>(element) == GgufType::Array)
      return bad(context, "an array of arrays, which GGUF readers refuse (llama.cpp: \"invalid GGUF type 9\")");
    v.element_ = static_cast<GgufType>(element);
    KVS_RETURN_IF_ERROR(read(v.count_, context, "the array's length"));
  }
  const std::string what = v.array_ ? "array of " + std::to_string(v.count_) + " " + ggufTypeName(v.element_)
                                    : std::string(ggufTypeName(v.element_)) + " value";
  if (v.element_ == GgufType::String) {
    // Each string takes at least its 8-byte length: a count beyond left()/8 cannot be there.
    if (v.count_ > left() / 8)
      return bad(context, what + " needs at least " + (v.count_ > UINT64_MAX / 8 ? std::string("2^64") : std::to_string(v.count_ * 8)) +
                              " bytes, more than the " + std::to_string(left()) + " left in the file");
    v.strings_.resize(static_cast<size_t>(v.count_));
    for (uint64_t i = 0; i < v.count_; ++i) {
      auto item = [&] { return v.array_ ? "string " + std::to_string(i) + " of the " + what : std::string("the string"); };
      KVS_RETURN_IF_ERROR(readString(v.strings_[static_cast<size_t>(i)], context, item));
    }
    return Status::ok();
  }
  const uint64_t size = fixedSize(v.element_);
  if (v.count_ > left() / size)
    return bad(context, what + " needs " +
                            (v.count_ > UINT64_MAX / size ? std::string("more than 2^64") : std::to_string(v.count_ * size)) +
                            " bytes at byte " + std::to_string(pos_) + ", more than the " + std::to_string(left()) +
                            " left in the file: truncated?");
  v.data_ = p_ + pos_;
  pos_ += v.count_ * size;
  return Status::ok();
}

Status GgufParser::readTensorInfo(GgufTensorInfo& t, size_t index, uint64_t total) {
  const std::string unnamed = "tensor info " + std::to_string(index) + " of " + std::to_string(total);
  std::string_view name;
  KVS_RETURN_IF_ERROR(readString(name, unnamed, "the tensor name"));
  t.name = std::string(name);
  const std::string context = "tensor '" + t.name + "'";
  uint32_t nDims = 0;
  KVS_RETURN_IF_ERROR(read(nDims, context, "the number of dimensions"));
  if (nDims > kMaxDims)
    return bad(context, std::to_string(nDims) + " dimensions; ggml tensors have at most " + std::to_string(kMaxDims));
  t.dims.resize(nDims);
  int64_t elements = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < nDims; ++d) {
    KVS_RETURN_IF_ERROR(read(t.dims[d], context, [d] { return "dimension " + std::to_string(d); }));
    if (t.dims[d] < 0) return bad(context, "dimension " + std::to_string(d) + " is " + std::to_string(t.dims[d]) + " (negative)");
    if (t.dims[d] != 0 && elements > INT64_MAX / t.dims[d]) overflow = true;
    if (!overflow) elements *= t.dims[d];
  }
  std::string dims = "[";
  for (size_t d = 0; d < t.dims.size(); ++d) dims += (d ? ", " : "") + std::to_string(t.dims[d]);
  dims += "]";
  // A zero dimension makes an empty tensor whatever the others say (ggml's check, too).
  if (overflow && std::find(t.dims.begin(), t.dims.end(), int64_t{0}) == t.dims.end())
    return bad(context, "dims " + dims + " (fastest first) hold more than 2^63 values");
  if (overflow) elements = 0;
  t.elements = elements;
  uint32_t typeId = 0;
  KVS_RETURN_IF_ERROR(read(typeId, context, "the ggml type"));
  const GgmlTypeInfo* type = ggmlTypeInfo(typeId);
  if (type == nullptr)
    return bad(context, "unknown ggml type " + std::to_string(typeId) + " (kvscope knows the types of ggml.h up to " +
                            "mxfp4 (39) and reads " + ggmlReadableTypeNames() + ")");
  t.type = type->type;
  const int64_t row = nDims > 0 ? t.dims[0] : 1;
  if (row % type->blockSize != 0)
    return bad(context, std::string("type ") + type->name + " packs blocks of " + std::to_string(type->blockSize) +
                            " values, and rows of " + std::to_string(row) + " (dims " + dims +
                            ", fastest first) are not whole blocks");
  auto bytes = ggmlBytes(t.type, static_cast<uint64_t>(elements));
  if (!bytes) return bad(context, bytes.status().message());
  t.bytes = *bytes;
  KVS_RETURN_IF_ERROR(read(t.offset, context, "the data offset"));
  return Status::ok();
}

Expected<std::shared_ptr<const GgufFile>> GgufParser::run() {
  std::shared_ptr<GgufFile> out(new GgufFile());
  out->file_ = file_;
  if (size_ < 4)
    return bad("", "not a GGUF file: " + std::to_string(size_) + " bytes, too short for the 4-byte magic 'GGUF'");
  if (std::memcmp(p_, "GGUF", 4) != 0)
    return bad("", "not a GGUF file: it starts with " + magicText(p_, 4) + ", expected 'GGUF'");
  pos_ = 4;
  const std::string header = "header";
  KVS_RETURN_IF_ERROR(read(out->version_, header, "the version"));
  const uint32_t v = out->version_;
  if (v != 0 && (v & 0xFFFFu) == 0)
    return bad(header, "version " + std::to_string(v) + " looks byte-swapped: a big-endian GGUF file? kvscope reads "
                       "little-endian GGUF (versions 2 and 3)");
  if (v == 1)
    return bad(header, "GGUF version 1 is no longer read (by llama.cpp either): convert the model again to version 3");
  if (v != 2 && v != 3) return bad(header, "unsupported GGUF version " + std::to_string(v) + " (kvscope reads 2 and 3)");
  int64_t nTensors = 0, nKv = 0;
  KVS_RETURN_IF_ERROR(read(nTensors, header, "the tensor count"));
  KVS_RETURN_IF_ERROR(read(nKv, header, "the metadata count"));
  if (nTensors < 0) return bad(header, "negative tensor count " + std::to_string(nTensors));
  if (nKv < 0) return bad(header, "negative metadata count " + std::to_string(nKv));
  // Each entry takes at least 13 bytes (8 + key + 4 + value), each tensor info 24: counts beyond
  // what the file can hold fail here, before anything is reserved for them.
  if (static_cast<uint64_t>(nKv) > left() / 13)
    return bad(header, std::to_string(nKv) + " metadata entries cannot fit in the " + std::to_string(left()) +
                           " bytes left in the file: truncated or corrupt");
  if (static_cast<uint64_t>(nTensors) > left() / 24)
    return bad(header, std::to_string(nTensors) + " tensor infos cannot fit in the " + std::to_string(left()) +
                           " bytes left in the file: truncated or corrupt");

  // Vectors grow with what is actually read, never by the counts alone.
  std::unordered_map<std::string_view, size_t> keys;  // views into the mapping
  for (size_t i = 0; i < static_cast<size_t>(nKv); ++i) {
    GgufEntry& e = out->entries_.emplace_back();
    std::string_view key;
    KVS_RETURN_IF_ERROR(readString(key, "metadata entry " + std::to_string(i) + " of " + std::to_string(nKv), "the key"));
    if (key.empty()) return bad("metadata entry " + std::to_string(i), "the key is empty");
    const std::string context = "key '" + std::string(key) + "'";
    if (auto [it, fresh] = keys.emplace(key, i); !fresh)
      return bad(context, "appears twice (entries " + std::to_string(it->second) + " and " + std::to_string(i) + ")");
    e.key = std::string(key);
    KVS_RETURN_IF_ERROR(readValue(e.value, context));
  }

  if (auto it = keys.find("general.alignment"); it != keys.end()) {
    const GgufValue& a = out->entries_[it->second].value;
    if (a.type() != GgufType::U32)
      return bad("key 'general.alignment'", std::string("expected u32 (as llama.cpp requires), found ") + a.typeName());
    const auto align = static_cast<uint64_t>(*a.integerAt(0));
    if (align == 0 || (align & (align - 1)) != 0)
      return bad("key 'general.alignment'", std::to_string(align) + " is not a power of two");
    out->alignment_ = align;
  } else {
    out->alignment_ = kDefaultAlignment;
  }

  std::unordered_map<std::string, size_t> names;
  for (size_t i = 0; i < static_cast<size_t>(nTensors); ++i) {
    GgufTensorInfo& t = out->tensors_.emplace_back();
    KVS_RETURN_IF_ERROR(readTensorInfo(t, i, static_cast<uint64_t>(nTensors)));
    if (auto [it, fresh] = names.emplace(t.name, i); !fresh)
      return bad("tensor '" + t.name + "'", "appears twice (tensor infos " + std::to_string(it->second) + " and " +
                                                std::to_string(i) + ")");
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t align = out->alignment_;
  const uint64_t infosEnd = pos_;
  const uint64_t padded = infosEnd % align == 0 ? infosEnd : infosEnd + (align - infosEnd % align);
  out->dataOffset_ = padded;
  if (!out->tensors_.empty() && padded > size_)
    return bad("data section", "would start at byte " + std::to_string(padded) + " (tensor infos end at " +
                                   std::to_string(infosEnd) + ", alignment " + std::to_string(align) +
                                   "), past the end of the file (" + std::to_string(size_) + " bytes): truncated?");
  const uint64_t dataSize = padded <= size_ ? size_ - padded : 0;
  for (GgufTensorInfo& t : out->tensors_) {
    const std::string context = "tensor '" + t.name + "'";
    if (t.offset % align != 0)
      return bad(context, "data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                              std::to_string(align));
    if (t.offset > dataSize || t.bytes > dataSize - t.offset)
      return bad(context, std::string(ggmlTypeInfo(t.type).name) + " data of " + std::to_string(t.bytes) +
                              " bytes at data offset " + std::to_string(t.offset) + " (file offset " +
                              (t.offset > UINT64_MAX - padded ? std::string("beyond 2^64") : std::to_string(padded + t.offset)) +
                              ") runs past the end of the file (" + std::to_string(size_) + " bytes): truncated?");
    t.fileOffset = padded + t.offset;
  }
  // No two tensors share bytes.
  std::vector<const GgufTensorInfo*> byOffset;
  byOffset.reserve(out->tensors_.size());
  for (const GgufTensorInfo& t : out->tensors_)
    if (t.bytes > 0) byOffset.push_back(&t);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const GgufTensorInfo& a = *byOffset[i - 1];
    const GgufTensorInfo& b = *byOffset[i];
    if (a.offset + a.bytes > b.offset)
      return bad("tensor '" + b.name + "'", "data at offset " + std::to_string(b.offset) + " overlaps tensor '" + a.name +
                                                "' (offset " + std::to_string(a.offset) + ", " + std::to_string(a.bytes) +
                                                " bytes)");
  }

  for (size_t i = 0; i < out->entries_.size(); ++i) out->entryIndex_.emplace(out->entries_[i].key, i);
  for (size_t i = 0; i < out->tensors_.size(); ++i) out->tensorIndex_.emplace(out->tensors_[i].name, i);
  return std::shared_ptr<const GgufFile>(std::move(out));
}

// ---- GgufFile --------------------------------------------------------------------------------

Expected<std::shared_ptr<const GgufFile>> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  return parse(std::move(*file));
}

Expected<std::shared_ptr<const GgufFile>> GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  return GgufParser(std::move(file)).run();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = entryIndex_.find(key);
  return it == entryIndex_.end() ? nullptr : &entries_[it->second].value;
}

const GgufTensorInfo* GgufFile::findTensor(std::string_view name) const {
  auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::keyError(std::string_view key, const std::string& problem) const {
  return Status::invalidData(path() + ": key '" + std::string(key) + "'" + problem);
}

Expected<const GgufValue*> GgufFile::scalar(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return keyError(key, " is missing");
  return v;
}

Expected<const GgufValue*> GgufFile::array(std::string_view key) const { return scalar(key); }

Expected<std::string> GgufFile::getString(std::string_view key) const {
  auto v = scalar(key);
  if (!v) return v.status();
  if ((*v)->type() != GgufType::String) return keyError(key, ": expected str, found " + (*v)->typeName());
  return std::string((*v)->stringAt(0));
}

Expected<std::string> GgufFile::getStringOr(std::string_view key, std::string fallback) const {
  return find(key) == nullptr ? Expected<std::string>(std::move(fallback)) : getString(key);
}

Expected<int64_t> GgufFile::getInt(std::string_view key) const {
  auto v = scalar(key);
  if (!v) return v.status();
  const GgufValue& value = **v;
  if (value.isArray() || !isGgufInteger(value.type()))
    return keyError(key, ": expected an integer, found " + value.typeName());
  auto i = value.integerAt(0);
  if (!i) return keyError(key, ": a u64 value that exceeds 2^63 - 1");
  return *i;
}

Expected<int64_t> GgufFile::getIntOr(std::string_view key, int64_t fallback) const {
  return find(key) == nullptr ? Expected<int64_t>(fallback) : getInt(key);
}

Expected<double> GgufFile::getFloat(std::string_view key) const {
  auto v = scalar(key);
  if (!v) return v.status();
  const GgufValue& value = **v;
  auto d = value.isArray() ? std::nullopt : value.numberAt(0);
  if (!d) return keyError(key, ": expected a number (f32, f64 or an integer), found " + value.typeName());
  return *d;
}

Expected<double> GgufFile::getFloatOr(std::string_view key, double fallback) const {
  return find(key) == nullptr ? Expected<double>(fallback) : getFloat(key);
}

Expected<bool> GgufFile::getBool(std::string_view key) const {
  auto v = scalar(key);
  if (!v) return v.status();
  if ((*v)->type() != GgufType::Bool) return keyError(key, ": expected bool, found " + (*v)->typeName());
  return (*v)->boolAt(0);
}

Expected<bool> GgufFile::getBoolOr(std::string_view key, bool fallback) const {
  return find(key) == nullptr ? Expected<bool>(fallback) : getBool(key);
}

Expected<std::span<const std::string_view>> GgufFile::getStringArrayView(std::string_view key) const {
  auto v = array(key);
  if (!v) return v.status();
  if (!(*v)->isArray() || (*v)->elementType() != GgufType::String)
    return keyError(key, ": expected an array of str, found " + (*v)->typeName());
  return (*v)->strings();
}

Expected<std::vector<std::string>> GgufFile::getStringArray(std::string_view key) const {
  auto view = getStringArrayView(key);
  if (!view) return view.status();
  return std::vector<std::string>(view->begin(), view->end());
}

Expected<std::vector<int64_t>> GgufFile::getIntArray(std::string_view key) const {
  auto v = array(key);
  if (!v) return v.status();
  const GgufValue& value = **v;
  if (!value.isArray() || !isGgufInteger(value.elementType()))
    return keyError(key, ": expected an array of integers, found " + value.typeName());
  std::vector<int64_t> out(static_cast<size_t>(value.size()));
  for (uint64_t i = 0; i < value.size(); ++i) {
    auto x = value.integerAt(i);
    if (!x) return keyError(key, ": element " + std::to_string(i) + " exceeds 2^63 - 1");
    out[static_cast<size_t>(i)] = *x;
  }
  return out;
}

Expected<std::vector<double>> GgufFile::getFloatArray(std::string_view key) const {
  auto v = array(key);
  if (!v) return v.status();
  const GgufValue& value = **v;
  const GgufType e = value.elementType();
  if (!value.isArray() || !(isGgufInteger(e) || e == GgufType::F32 || e == GgufType::F64))
    return keyError(key, ": expected an array of numbers, found " + value.typeName());
  std::vector<double> out(static_cast<size_t>(value.size()));
  for (uint64_t i = 0; i < value.size(); ++i) out[static_cast<size_t>(i)] = *value.numberAt(i);
  return out;
}

std::vector<std::string> GgufFile::weightNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

WeightTensor GgufFile::weight(const GgufTensorInfo& info) const {
  WeightTensor w;
  w.name = info.name;
  w.shape = info.shape();
  w.type = info.type;
  w.data = file_->bytes().data() + info.fileOffset;
  w.bytes = info.bytes;
  w.file = path();
  return w;
}

Expected<WeightTensor> GgufFile::weight(std::string_view name) const {
  const GgufTensorInfo* info = findTensor(name);
  if (info == nullptr) return Status::invalidData(path() + ": tensor '" + std::string(name) + "' is missing");
  return weight(*info);
}

}  // namespace kvscope
