// SPDX-License-Identifier: GPL-3.0-or-later
// Writes .safetensors files and Hugging Face model folders for tests: tensors in insertion
// order, the JSON header padded with spaces to a multiple of 8 (as the safetensors library
// writes it), single files or shards with model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kvscope::test {

/// The bytes of n floats as a safetensors dtype: "F32", "F16" or "BF16" (round to nearest even);
/// throws std::invalid_argument for another dtype.
std::vector<uint8_t> encodeSafetensors(const std::string& dtype, std::span<const float> values);

class SafetensorsWriter {
 public:
  /// A tensor of a row-major shape from floats, as dtype F32, F16 or BF16.
  void addTensor(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
                 std::span<const float> values);
  /// A tensor from bytes, any dtype string.
  void addTensorBytes(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
                      std::vector<uint8_t> bytes);
  /// An entry of __metadata__.
  void setMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  /// The JSON header as written (before padding).
  [[nodiscard]] std::string headerJson() const;
  /// The file's bytes.
  [[nodiscard]] std::vector<uint8_t> bytes() const;
  /// Writes the file; false on an I/O error.
  bool write(const std::string& path) const;
  /// Names in insertion order.
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    std::string dtype;
    std::vector<uint8_t> bytes;
  };
  friend class HfFolderWriter;
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A Hugging Face folder: config.json and the tensors, as model.safetensors (shards = 1) or
/// model-0000i-of-0000n.safetensors with model.safetensors.index.json.
class HfFolderWriter {
 public:
  explicit HfFolderWriter(std::string configJson) : config_(std::move(configJson)) {}
  void addTensor(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
                 std::span<const float> values) {
    all_.addTensor(name, shape, dtype, values);
  }
  void addTensorBytes(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
                      std::vector<uint8_t> bytes) {
    all_.addTensorBytes(name, shape, dtype, std::move(bytes));
  }
  /// Writes into `folder` (created when missing), the tensors dealt round-robin over `shards`
  /// files when shards > 1. False on an I/O error.
  bool write(const std::string& folder, int shards = 1) const;

 private:
  std::string config_;
  SafetensorsWriter all_;
};

}  // namespace kvscope::test
