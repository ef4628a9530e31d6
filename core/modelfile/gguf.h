// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF v2 and v3 files (ggml's docs/gguf.md), memory-mapped and validated whole before any weight
// is touched: the header, every metadata value, `general.alignment`, and each tensor's name,
// dims, ggml type and data range. Nothing is read outside the mapping, no count or length from
// the file is trusted before the bytes it needs are known to be there, and every error names the
// file and the key or tensor (docs/real-models.md, "Model files").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/modelfile/mapped_file.h"
#include "core/modelfile/weights.h"
#include "core/quant/ggml_types.h"
#include "core/util/status.h"

namespace kvscope {

/// GGUF's metadata value types (gguf.h `enum gguf_type`).
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

/// ggml's name of a value type: "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str",
/// "arr", "u64", "i64", "f64".
const char* ggufTypeName(GgufType type);
/// True for the eight integer types.
bool isGgufInteger(GgufType type);

/// One metadata value: a scalar or an array of scalars. Numbers stay in the file's mapping
/// (little-endian, read on access); strings are views into the mapping, already checked to be
/// UTF-8. Valid while its GgufFile lives.
class GgufValue {
 public:
  /// The scalar's type, or Array.
  [[nodiscard]] GgufType type() const { return array_ ? GgufType::Array : element_; }
  /// The element type of an array; the type of a scalar.
  [[nodiscard]] GgufType elementType() const { return element_; }
  [[nodiscard]] bool isArray() const { return array_; }
  /// Number of elements (1 for a scalar).
  [[nodiscard]] uint64_t size() const { return count_; }
  /// "u32", "str", "array of str".
  [[nodiscard]] std::string typeName() const;

  /// Element i of an integer value; nullopt when it is not an integer type or a u64 above
  /// INT64_MAX. i < size().
  [[nodiscard]] std::optional<int64_t> integerAt(uint64_t i) const;
  /// Element i of a numeric value (integers, f32, f64) as a double; nullopt for bool and str.
  [[nodiscard]] std::optional<double> numberAt(uint64_t i) const;
  /// Element i of a bool value (any nonzero byte is true, as in ggml).
  [[nodiscard]] bool boolAt(uint64_t i) const;
  /// Element i of a string value (empty for other types).
  [[nodiscard]] std::string_view stringAt(uint64_t i) const;
  /// All strings of a string value (empty for other types).
  [[nodiscard]] std::span<const std::string_view> strings() const { return strings_; }

 private:
  friend class GgufParser;
  GgufType element_ = GgufType::U8;
  bool array_ = false;
  uint64_t count_ = 1;
  const uint8_t* data_ = nullptr;        ///< numbers and bools: count_ elements, packed
  std::vector<std::string_view> strings_;  ///< strings
};

/// One metadata entry, in file order.
struct GgufEntry {
  std::string key;
  GgufValue value;
};

/// One tensor info, validated: a known ggml type, whole blocks per row, data inside the file.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  ///< ggml order, fastest-varying first (a [out, in] matrix is {in, out})
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;        ///< relative to the data section, a multiple of the alignment
  uint64_t fileOffset = 0;    ///< absolute
  uint64_t bytes = 0;
  int64_t elements = 0;
  /// Row-major shape, slowest first (dims reversed).
  [[nodiscard]] std::vector<int64_t> shape() const { return {dims.rbegin(), dims.rend()}; }
};

/// An open GGUF file. Immutable; shared between threads.
class GgufFile final : public WeightSource {
 public:
  /// Maps and validates `path` (MappedFile refuses non-regular files).
  static Expected<std::shared_ptr<const GgufFile>> open(const std::string& path);
  /// Validates an already mapped file.
  static Expected<std::shared_ptr<const GgufFile>> parse(std::shared_ptr<const MappedFile> file);

  /// 2 or 3.
  [[nodiscard]] uint32_t version() const { return version_; }
  [[nodiscard]] const std::string& path() const override { return file_->path(); }
  /// `general.alignment` or 32.
  [[nodiscard]] uint64_t alignment() const { return alignment_; }
  /// Absolute offset of the data section.
  [[nodiscard]] uint64_t dataOffset() const { return dataOffset_; }
  /// The mapping (its bytes outlive every view handed out while this object lives).
  [[nodiscard]] const MappedFile& file() const { return *file_; }

  /// Every metadata entry in file order.
  [[nodiscard]] std::span<const GgufEntry> entries() const { return entries_; }
  /// The value of a key; nullptr when absent.
  [[nodiscard]] const GgufValue* find(std::string_view key) const;

  // Typed getters. Errors name the file, the key, the type expected and the type found
  // ("model.gguf: key 'llama.block_count': expected an integer, found str"); a missing key is
  // "model.gguf: key 'llama.block_count' is missing". The *Or forms return the fallback for an
  // absent key and still refuse a present one of the wrong type.
  /// A str value.
  [[nodiscard]] Expected<std::string> getString(std::string_view key) const;
  [[nodiscard]] Expected<std::string> getStringOr(std::string_view key, std::string fallback) const;
  /// Any integer type; a u64 above INT64_MAX is refused.
  [[nodiscard]] Expected<int64_t> getInt(std::string_view key) const;
  [[nodiscard]] Expected<int64_t> getIntOr(std::string_view key, int64_t fallback) const;
  /// f32, f64 or an integer.
  [[nodiscard]] Expected<double> getFloat(std::string_view key) const;
  [[nodiscard]] Expected<double> getFloatOr(std::string_view key, double fallback) const;
  /// A bool value.
  [[nodiscard]] Expected<bool> getBool(std::string_view key) const;
  [[nodiscard]] Expected<bool> getBoolOr(std::string_view key, bool fallback) const;
  /// An array of str, copied.
  [[nodiscard]] Expected<std::vector<std::string>> getStringArray(std::string_view key) const;
  /// An array of str as views into the mapping (no copy; for vocabularies).
  [[nodiscard]] Expected<std::span<const std::string_view>> getStringArrayView(std::string_view key) const;
  /// An array of any integer type.
  [[nodiscard]] Expected<std::vector<int64_t>> getIntArray(std::string_view key) const;
  /// An array of f32, f64 or integers.
  [[nodiscard]] Expected<std::vector<double>> getFloatArray(std::string_view key) const;

  /// Every tensor info in file order.
  [[nodiscard]] std::span<const GgufTensorInfo> tensors() const { return tensors_; }
  /// A tensor info by name; nullptr when absent.
  [[nodiscard]] const GgufTensorInfo* findTensor(std::string_view name) const;

  // WeightSource
  [[nodiscard]] std::vector<std::string> weightNames() const override;
  [[nodiscard]] bool hasWeight(std::string_view name) const override { return findTensor(name) != nullptr; }
  [[nodiscard]] Expected<WeightTensor> weight(std::string_view name) const override;
  /// The view of a tensor of this file.
  [[nodiscard]] WeightTensor weight(const GgufTensorInfo& info) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  Status keyError(std::string_view key, const std::string& problem) const;
  Expected<const GgufValue*> scalar(std::string_view key) const;
  Expected<const GgufValue*> array(std::string_view key) const;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t dataOffset_ = 0;
  std::vector<GgufEntry> entries_;
  std::unordered_map<std::string_view, size_t> entryIndex_;  ///< views of entries_[i].key
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensorIndex_;  ///< views of tensors_[i].name
};

}  // namespace kvscope
