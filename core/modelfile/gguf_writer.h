// SPDX-License-Identifier: GPL-3.0-or-later
// Writes GGUF files, for the tests and the benchmarks (no model file is committed; both write the
// models they use): metadata of every type, arrays,
// alignment, tensors of any ggml type from floats (encoded as ggml's quantize_row_*_ref) or from
// bytes, and random valid blocks for the types kvscope only reads (the K-quants). The layout is
// what llama.cpp's gguf.cpp requires: tensor data contiguous in info order, each padded to the
// alignment. Raw entries let tests write what no valid writer would. Misuse (a type without an
// encoder, a count that is not whole blocks) throws std::invalid_argument: a programmer's error,
// never a user's input.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/modelfile/gguf.h"
#include "core/quant/ggml_types.h"

namespace kvscope {

/// n values of `type` encoded as ggml's from_float_ref (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
/// Q5_1, IQ4_NL); throws std::invalid_argument for a type without an encoder or a count that is
/// not whole blocks.
std::vector<uint8_t> encodeGgml(GgmlType type, std::span<const float> values);

/// `values` values of `type` as random bytes that are valid blocks: every fp16 scale field (and
/// every F16/BF16/F32 value) overwritten with a finite number, so dequantization stays finite.
/// Deterministic for a seed; works for every type kvscope reads.
std::vector<uint8_t> randomGgmlBlocks(GgmlType type, int64_t values, uint64_t seed);

/// Dims fastest-first (GGUF order) of a row-major shape, and back.
std::vector<int64_t> ggmlDims(const std::vector<int64_t>& shapeRowMajor);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  /// The version field written in the header (any value, for hostile tests).
  void setVersion(uint32_t version) { version_ = version; }
  /// Sets general.alignment (u32) and aligns the data with it.
  void setAlignment(uint32_t alignment);
  /// Aligns the data to `alignment` without writing general.alignment (hostile tests).
  void setDataAlignment(uint64_t alignment) { alignment_ = alignment; }

  // Scalars, one overload per GGUF type (a later set of a key replaces the earlier value in place).
  void set(std::string_view key, uint8_t v);
  void set(std::string_view key, int8_t v);
  void set(std::string_view key, uint16_t v);
  void set(std::string_view key, int16_t v);
  void set(std::string_view key, uint32_t v);
  void set(std::string_view key, int32_t v);
  void set(std::string_view key, float v);
  void set(std::string_view key, bool v);
  void set(std::string_view key, std::string_view v);
  void set(std::string_view key, const char* v) { set(key, std::string_view(v)); }
  void set(std::string_view key, uint64_t v);
  void set(std::string_view key, int64_t v);
  void set(std::string_view key, double v);

  // Arrays.
  void setArray(std::string_view key, const std::vector<uint8_t>& v);
  void setArray(std::string_view key, const std::vector<int8_t>& v);
  void setArray(std::string_view key, const std::vector<uint16_t>& v);
  void setArray(std::string_view key, const std::vector<int16_t>& v);
  void setArray(std::string_view key, const std::vector<uint32_t>& v);
  void setArray(std::string_view key, const std::vector<int32_t>& v);
  void setArray(std::string_view key, const std::vector<float>& v);
  void setArray(std::string_view key, const std::vector<bool>& v);
  void setArray(std::string_view key, const std::vector<std::string>& v);
  void setArray(std::string_view key, const std::vector<uint64_t>& v);
  void setArray(std::string_view key, const std::vector<int64_t>& v);
  void setArray(std::string_view key, const std::vector<double>& v);

  /// An entry written as given: the key (any bytes), the u32 type id, then `value` verbatim.
  void setRaw(std::string_view key, uint32_t typeId, std::vector<uint8_t> value);
  /// The same, always appended (a key may then appear twice).
  void appendRaw(std::string_view key, uint32_t typeId, std::vector<uint8_t> value);
  /// Removes a key (no effect when absent).
  void erase(std::string_view key);

  /// A tensor of a row-major shape ([out, in] for a matrix) from floats, encoded as `type`.
  void addTensor(std::string name, const std::vector<int64_t>& shapeRowMajor, GgmlType type,
                 std::span<const float> values);
  /// The same with GGUF dims (fastest first).
  void addTensorDims(std::string name, const std::vector<int64_t>& dims, GgmlType type, std::span<const float> values);
  /// A tensor of random valid blocks (randomGgmlBlocks) of a row-major shape.
  void addRandomTensor(std::string name, const std::vector<int64_t>& shapeRowMajor, GgmlType type, uint64_t seed);
  /// A tensor info with any type id and bytes; `offset` overrides the computed data offset
  /// (hostile tests). The bytes are written in the data section in info order.
  void addTensorBytes(std::string name, const std::vector<int64_t>& dims, uint32_t typeId, std::vector<uint8_t> bytes,
                      std::optional<uint64_t> offset = std::nullopt);

  /// The file's bytes.
  [[nodiscard]] std::vector<uint8_t> bytes() const;
  /// Writes the file; false on an I/O error.
  bool write(const std::string& path) const;
  /// Absolute offset of the data section in bytes().
  [[nodiscard]] uint64_t dataOffset() const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  ///< type id and value
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t typeId = 0;
    std::vector<uint8_t> bytes;
    std::optional<uint64_t> offset;
  };
  void put(std::string_view key, std::vector<uint8_t> encoded);
  std::vector<uint8_t> header() const;

  uint32_t version_;
  uint64_t alignment_ = 32;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvscope
