// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors files (u64 header length, a JSON header, the data section) and Hugging Face model
// folders (config.json with model.safetensors, or shards listed by model.safetensors.index.json).
// Validated as the safetensors library validates (safetensors/src/tensor.rs): a header no larger
// than the file, tensors whose data_offsets tile the data section exactly, in order, each of
// product(shape) · dtype size bytes. Weights of dtype F32, F16 and BF16 can be read; other
// dtypes are parsed and refused when asked for (docs/real-models.md, "Model files").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/modelfile/mapped_file.h"
#include "core/modelfile/weights.h"
#include "core/util/status.h"

namespace kvscope {

/// One tensor of a safetensors header, validated.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;           ///< as written: "F32", "BF16", "I64", "F8_E4M3", …
  std::vector<int64_t> shape;  ///< row-major, slowest first
  uint64_t begin = 0, end = 0;  ///< data_offsets, relative to the data section
  uint64_t fileOffset = 0;     ///< absolute offset of begin
  [[nodiscard]] uint64_t bytes() const { return end - begin; }
};

/// Bits per element of a safetensors dtype ("F16" → 16, "F4" → 4); 0 when unknown.
int safetensorsDtypeBits(std::string_view dtype);

/// An open .safetensors file. Immutable; shared between threads.
class SafetensorsFile final : public WeightSource {
 public:
  /// Maps and validates `path`.
  static Expected<std::shared_ptr<const SafetensorsFile>> open(const std::string& path);
  /// Validates an already mapped file.
  static Expected<std::shared_ptr<const SafetensorsFile>> parse(std::shared_ptr<const MappedFile> file);

  [[nodiscard]] const std::string& path() const override { return file_->path(); }
  /// Absolute offset of the data section (8 + the header length).
  [[nodiscard]] uint64_t dataOffset() const { return dataOffset_; }
  /// The header's `__metadata__` (string to string), empty when absent.
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Every tensor, in data order.
  [[nodiscard]] std::span<const SafetensorsTensorInfo> tensors() const { return tensors_; }
  /// A tensor by name; nullptr when absent.
  [[nodiscard]] const SafetensorsTensorInfo* findTensor(std::string_view name) const;

  // WeightSource: F32, F16 and BF16 tensors; any other dtype is refused naming tensor and dtype.
  [[nodiscard]] std::vector<std::string> weightNames() const override;
  [[nodiscard]] bool hasWeight(std::string_view name) const override { return findTensor(name) != nullptr; }
  [[nodiscard]] Expected<WeightTensor> weight(std::string_view name) const override;

 private:
  SafetensorsFile() = default;
  std::shared_ptr<const MappedFile> file_;
  uint64_t dataOffset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

/// A Hugging Face model folder: config.json and its safetensors weights. Immutable.
class HfCheckpoint final : public WeightSource {
 public:
  /// Reads `folder`/config.json, then model.safetensors when present (as transformers prefers
  /// it), else model.safetensors.index.json and every shard its weight_map names. Each file is
  /// validated; every weight_map entry must be in the shard it names.
  static Expected<std::shared_ptr<const HfCheckpoint>> open(const std::string& folder);
  ~HfCheckpoint() override;
  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  [[nodiscard]] const std::string& path() const override { return folder_; }
  /// config.json as written.
  [[nodiscard]] const std::string& configText() const { return configText_; }
  /// config.json parsed (a JSON object).
  [[nodiscard]] const nlohmann::json& config() const { return *config_; }
  /// The weight files (one, or the shards in name order).
  [[nodiscard]] std::span<const std::shared_ptr<const SafetensorsFile>> files() const { return files_; }

  // WeightSource: names in the single file's data order, or sorted by name for shards.
  [[nodiscard]] std::vector<std::string> weightNames() const override { return names_; }
  [[nodiscard]] bool hasWeight(std::string_view name) const override;
  [[nodiscard]] Expected<WeightTensor> weight(std::string_view name) const override;

 private:
  HfCheckpoint();
  std::string folder_;
  std::string configText_;
  std::unique_ptr<nlohmann::json> config_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> fileOf_;  ///< weight name → index into files_
};

}  // namespace kvscope
