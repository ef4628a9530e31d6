// SPDX-License-Identifier: GPL-3.0-or-later
// Reading KV dumps (../shared/spec/dump-format.md): metadata on open, data per layer on demand.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/mapping.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Which tensor of a layer.
enum class TensorKind { Key, Value, Query, KeyPreRope };

/// "key", "value", "query", "key_pre_rope": the dataset names of the format, used everywhere.
const char* tensorKindName(TensorKind kind);

/// RoPE pairing convention of the dump (`rope_style`).
enum class RopeStyle { Half, Interleaved };
const char* ropeStyleName(RopeStyle style);

/// Everything known about a dump after opening it (no tensor data is read).
struct DumpInfo {
  std::string path;
  std::string model;        ///< `model` attribute, empty when absent
  int layers = 0;           ///< L
  int kvHeads = 0;          ///< KVH
  int heads = 0;            ///< H (query heads); equals kvHeads when there is no query
  int tokens = 0;           ///< T
  int queries = 0;          ///< Tq, 0 when there is no query
  int headDim = 0;          ///< D
  int sequences = 1;        ///< B (1 without a batch axis)
  std::string dtype;        ///< element type of `key` on disk: "float16", "float32", "float64", "float<bits>"
  bool hasQuery = false;
  bool hasKeyPreRope = false;
  bool hasTokens = false;
  bool hasTokenText = false;
  bool hasLogits = false;   ///< `/logits` written by `kvscope-cli record`
  bool canonical = true;    ///< false when opened through a mapping
  double ropeTheta = 10000.0;
  RopeStyle ropeStyle = RopeStyle::Half;
  double softmaxScale = 0.0;  ///< the dump's `softmax_scale`, or 1/sqrt(D)
  std::string modelPath;      ///< `model_path` attribute written by `record`, empty when absent
  std::vector<std::string> warnings;

  /// fp16 K+V bytes per token over all layers: 2 tensors * L * KVH * D * 2 bytes.
  [[nodiscard]] int64_t bytesPerTokenFp16() const {
    return int64_t{2} * layers * kvHeads * headDim * 2;
  }
  /// Number of query heads that share one kv head.
  [[nodiscard]] int groupSize() const { return kvHeads > 0 ? heads / kvHeads : 0; }
};

/// Options for Dump::open.
struct OpenOptions {
  std::optional<Mapping> mapping;     ///< read a non-canonical file through this mapping
  bool allowExternalStorage = false;  ///< external links, external raw storage, virtual datasets
};

/// Count and first location of non-finite values in a tensor.
struct NonFiniteReport {
  int64_t nanCount = 0;
  int64_t infCount = 0;
  int64_t firstHead = -1, firstToken = -1, firstChannel = -1;  ///< -1 when all finite
  [[nodiscard]] bool allFinite() const { return nanCount == 0 && infCount == 0; }
};
NonFiniteReport scanNonFinite(const Tensor3& t);

/// An open dump. Immutable after open; reads are serialized internally (HDF5 is not thread-safe),
/// so one Dump may be shared between threads as `shared_ptr<const Dump>`.
class Dump {
 public:
  /// Opens and validates `path`, reading metadata only. Errors name the file, dataset and problem.
  static Expected<std::shared_ptr<const Dump>> open(const std::string& path,
                                                     const OpenOptions& options = {});
  ~Dump();
  Dump(const Dump&) = delete;
  Dump& operator=(const Dump&) = delete;

  [[nodiscard]] const DumpInfo& info() const;

  /// Reads one layer's tensor of one sequence as float32 [heads, tokens, dim] (hyperslab read).
  [[nodiscard]] Expected<Tensor3> read(int layer, TensorKind kind, int sequence = 0) const;
  /// Token ids of a sequence (empty when the dump has none).
  [[nodiscard]] Expected<std::vector<int64_t>> tokens(int sequence = 0) const;
  /// Token texts of a sequence (empty when the dump has none).
  [[nodiscard]] Expected<std::vector<std::string>> tokenText(int sequence = 0) const;
  /// `/logits` [T, vocab] of a sequence, row-major (only when info().hasLogits).
  [[nodiscard]] Expected<std::vector<float>> logits(int sequence = 0) const;

  struct Impl;

 private:
  explicit Dump(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
