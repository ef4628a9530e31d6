// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/modelfile/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include "core/util/small_float.h"

namespace kvscope {
namespace {

// resize + memcpy rather than insert: GCC 12 warns (wrongly) about inserts into small vectors.
void appendBytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  appendBytes(out, &v, sizeof(T));
}

void appendString(std::vector<uint8_t>& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  appendBytes(out, s.data(), s.size());
}

template <typename T>
std::vector<uint8_t> scalar(GgufType type, T v) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(type));
  append<T>(out, v);
  return out;
}

template <typename T>
std::vector<uint8_t> array(GgufType type, const std::vector<T>& v) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::Array));
  append<uint32_t>(out, static_cast<uint32_t>(type));
  append<uint64_t>(out, v.size());
  for (const T& x : v) append<T>(out, x);
  return out;
}

/// Byte offsets of the fp16 scale fields in one block of a type (ggml-common.h).
std::vector<size_t> halfFields(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Iq4Nl:
    case GgmlType::Iq4Xs: return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

}  // namespace

std::vector<uint8_t> encodeGgml(GgmlType type, std::span<const float> values) {
  const GgmlTypeInfo& info = ggmlTypeInfo(type);
  if (info.quantize == nullptr) throw std::invalid_argument(std::string("no encoder for ggml type ") + info.name);
  auto bytes = ggmlBytes(type, values.size());
  if (!bytes) throw std::invalid_argument(bytes.status().message());
  std::vector<uint8_t> out(static_cast<size_t>(*bytes));
  info.quantize(values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<uint8_t> randomGgmlBlocks(GgmlType type, int64_t values, uint64_t seed) {
  const GgmlTypeInfo& info = ggmlTypeInfo(type);
  auto size = ggmlBytes(type, static_cast<uint64_t>(values));
  if (!size) throw std::invalid_argument(size.status().message());
  std::mt19937_64 gen(seed);
  std::vector<uint8_t> out(static_cast<size_t>(*size));
  for (uint8_t& b : out) b = static_cast<uint8_t>(gen());
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  // A finite scale of magnitude 2^-10..2^-4 with either sign keeps every reconstruction small.
  auto scale = [&] {
    const float m = std::ldexp(1.0f + std::fabs(unit(gen)), -4 - static_cast<int>(gen() % 7));
    return fp::fp16Bits(unit(gen) < 0 ? -m : m);
  };
  switch (type) {
    case GgmlType::F32:
      for (int64_t i = 0; i < values; ++i) {
        const float v = unit(gen);
        std::memcpy(out.data() + 4 * i, &v, 4);
      }
      return out;
    case GgmlType::F16:
    case GgmlType::Bf16:
      for (int64_t i = 0; i < values; ++i) {
        const float v = unit(gen);
        const uint16_t h = type == GgmlType::F16 ? fp::fp16Bits(v) : fp::bf16Bits(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      return out;
    default: break;
  }
  const std::vector<size_t> fields = halfFields(type);
  if (fields.empty()) throw std::invalid_argument(std::string("no random blocks for ggml type ") + info.name);
  const int64_t blocks = values / info.blockSize;
  for (int64_t b = 0; b < blocks; ++b) {
    for (size_t f : fields) {
      const uint16_t h = scale();
      std::memcpy(out.data() + b * info.typeSize + static_cast<int64_t>(f), &h, 2);
    }
  }
  return out;
}

std::vector<int64_t> ggmlDims(const std::vector<int64_t>& shape) { return {shape.rbegin(), shape.rend()}; }

void GgufWriter::setAlignment(uint32_t alignment) {
  set("general.alignment", alignment);
  alignment_ = alignment;
}

void GgufWriter::put(std::string_view key, std::vector<uint8_t> encoded) {
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  entries_.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::set(std::string_view k, uint8_t v) { put(k, scalar(GgufType::U8, v)); }
void GgufWriter::set(std::string_view k, int8_t v) { put(k, scalar(GgufType::I8, v)); }
void GgufWriter::set(std::string_view k, uint16_t v) { put(k, scalar(GgufType::U16, v)); }
void GgufWriter::set(std::string_view k, int16_t v) { put(k, scalar(GgufType::I16, v)); }
void GgufWriter::set(std::string_view k, uint32_t v) { put(k, scalar(GgufType::U32, v)); }
void GgufWriter::set(std::string_view k, int32_t v) { put(k, scalar(GgufType::I32, v)); }
void GgufWriter::set(std::string_view k, float v) { put(k, scalar(GgufType::F32, v)); }
void GgufWriter::set(std::string_view k, bool v) { put(k, scalar(GgufType::Bool, static_cast<uint8_t>(v ? 1 : 0))); }
void GgufWriter::set(std::string_view k, uint64_t v) { put(k, scalar(GgufType::U64, v)); }
void GgufWriter::set(std::string_view k, int64_t v) { put(k, scalar(GgufType::I64, v)); }
void GgufWriter::set(std::string_view k, double v) { put(k, scalar(GgufType::F64, v)); }
void GgufWriter::set(std::string_view k, std::string_view v) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::String));
  appendString(out, v);
  put(k, std::move(out));
}

void GgufWriter::setArray(std::string_view k, const std::vector<uint8_t>& v) { put(k, array(GgufType::U8, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<int8_t>& v) { put(k, array(GgufType::I8, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<uint16_t>& v) { put(k, array(GgufType::U16, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<int16_t>& v) { put(k, array(GgufType::I16, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<uint32_t>& v) { put(k, array(GgufType::U32, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<int32_t>& v) { put(k, array(GgufType::I32, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<float>& v) { put(k, array(GgufType::F32, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<uint64_t>& v) { put(k, array(GgufType::U64, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<int64_t>& v) { put(k, array(GgufType::I64, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<double>& v) { put(k, array(GgufType::F64, v)); }
void GgufWriter::setArray(std::string_view k, const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  put(k, array(GgufType::Bool, bytes));
}
void GgufWriter::setArray(std::string_view k, const std::vector<std::string>& v) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::Array));
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::String));
  append<uint64_t>(out, v.size());
  for (const std::string& s : v) appendString(out, s);
  put(k, std::move(out));
}

void GgufWriter::setRaw(std::string_view key, uint32_t typeId, std::vector<uint8_t> value) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, typeId);
  appendBytes(out, value.data(), value.size());
  put(key, std::move(out));
}

void GgufWriter::appendRaw(std::string_view key, uint32_t typeId, std::vector<uint8_t> value) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, typeId);
  appendBytes(out, value.data(), value.size());
  entries_.push_back({std::string(key), std::move(out)});
}

void GgufWriter::erase(std::string_view key) {
  std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
}

void GgufWriter::addTensor(std::string name, const std::vector<int64_t>& shape, GgmlType type,
                           std::span<const float> values) {
  addTensorDims(std::move(name), ggmlDims(shape), type, values);
}

void GgufWriter::addTensorDims(std::string name, const std::vector<int64_t>& dims, GgmlType type,
                               std::span<const float> values) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("tensor '" + name + "': " + std::to_string(values.size()) + " values for " +
                                std::to_string(n) + " elements");
  addTensorBytes(std::move(name), dims, static_cast<uint32_t>(type), encodeGgml(type, values));
}

void GgufWriter::addRandomTensor(std::string name, const std::vector<int64_t>& shape, GgmlType type, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  addTensorBytes(std::move(name), ggmlDims(shape), static_cast<uint32_t>(type), randomGgmlBlocks(type, n, seed));
}

void GgufWriter::addTensorBytes(std::string name, const std::vector<int64_t>& dims, uint32_t typeId,
                                std::vector<uint8_t> bytes, std::optional<uint64_t> offset) {
  tensors_.push_back({std::move(name), dims, typeId, std::move(bytes), offset});
}

std::vector<uint8_t> GgufWriter::header() const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  append<uint32_t>(out, version_);
  append<int64_t>(out, static_cast<int64_t>(tensors_.size()));
  append<int64_t>(out, static_cast<int64_t>(entries_.size()));
  for (const Entry& e : entries_) {
    appendString(out, e.key);
    appendBytes(out, e.encoded.data(), e.encoded.size());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    appendString(out, t.name);
    append<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) append<int64_t>(out, d);
    append<uint32_t>(out, t.typeId);
    append<uint64_t>(out, t.offset.value_or(offset));
    offset += (t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  return out;
}

uint64_t GgufWriter::dataOffset() const {
  const uint64_t end = header().size();
  return (end + alignment_ - 1) / alignment_ * alignment_;
}

std::vector<uint8_t> GgufWriter::bytes() const {
  std::vector<uint8_t> out = header();
  if (tensors_.empty()) return out;
  out.resize(dataOffset(), 0);
  for (const Tensor& t : tensors_) {
    appendBytes(out, t.bytes.data(), t.bytes.size());
    out.resize((out.size() - dataOffset() + alignment_ - 1) / alignment_ * alignment_ + dataOffset(), 0);
  }
  return out;
}

bool GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return static_cast<bool>(out);
}

}  // namespace kvscope
