// SPDX-License-Identifier: GPL-3.0-or-later
// Reading KV dumps (../shared/spec/dump-format.md): metadata on open, data per layer on demand.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/mapping.h"
#include "core/util/status.h"
#include "core/util/tensor.h"
#include "core/util/vocabulary.h"

namespace kvscope {

/// Everything known about a dump after opening it (no tensor data is read). A reader process sends
/// it field by field (writeInfo/readInfo in core/io/isolated_reader.cpp): a new field goes there too.
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
  std::vector<double> ropeInvFreq;  ///< `rope_inv_freq` [D/2] (kvscope's extension), empty when absent
  double softmaxScale = 0.0;  ///< the dump's `softmax_scale`, or 1/sqrt(D)
  std::string modelPath;      ///< `model_path` attribute written by `record`, empty when absent
  std::vector<std::string> warnings;

  /// fp16 K+V bytes per token over all layers: 2 tensors * L * KVH * D * 2 bytes.
  [[nodiscard]] int64_t bytesPerTokenFp16() const {
    return int64_t{2} * layers * kvHeads * headDim * 2;
  }
  /// RoPE as the dump describes it, for `prerope` specs.
  [[nodiscard]] RopeParams rope() const { return RopeParams{ropeTheta, ropeStyle, ropeInvFreq}; }
  /// Number of query heads that share one kv head.
  [[nodiscard]] int groupSize() const { return kvHeads > 0 ? heads / kvHeads : 0; }
};

/// Where Dump::open parses the file. libhdf5 1.10 can crash or loop on crafted files, in an open
/// or in a data read, and kvscope cannot validate below it; a reader process (core/io/
/// isolated_reader.h) takes the crash or the hang, and the caller gets an error naming the file.
struct IsolationOptions {
  std::string executable;      ///< program with a reader mode (kvscope-cli); empty: this process
  int openTimeoutMs = 30000;   ///< the open, with the token reads that follow it
  int readTimeoutMs = 30000;   ///< one read, plus 1 s per 32 MiB of the dump's largest tensor
  std::function<bool()> cancelled;  ///< polled while waiting for the reader; true abandons the wait
};

/// Options for Dump::open.
struct OpenOptions {
  std::optional<Mapping> mapping;     ///< read a non-canonical file through this mapping
  bool allowExternalStorage = false;  ///< external links, external raw storage, virtual datasets
  IsolationOptions isolation;         ///< parse in a reader process (every read of the dump too)
};

/// What the file really stores of one layer's tensor. HDF5 allocates a chunk only when it is
/// written; a chunk never written reads as the fill value, so a tiny file may declare a huge
/// batch. Scanning only the sequences with stored chunks keeps a scan bounded by the file size.
struct StoredData {
  int64_t declaredBytes = 0;  ///< elements × element size of the dataset holding the tensor
  int64_t storedBytes = 0;    ///< bytes allocated for it in the file (H5Dget_storage_size)
  int64_t chunks = 0;         ///< chunks the dataset declares (0: not chunked)
  int64_t storedChunks = 0;   ///< chunks actually in the file
  bool everySequence = true;  ///< every sequence has stored data for this layer
  std::vector<int> sequences;  ///< when !everySequence: the sequences with stored data, ascending
  bool listTruncated = false;  ///< more stored chunks than were looked at (kMaxChunksListed)
  static constexpr int64_t kMaxChunksListed = 4096;
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
  /// Like read(), into caller memory of `capacity` floats; returns [heads, tokens, dim] (the
  /// reader process fills its shared memory this way, without a copy).
  [[nodiscard]] Expected<std::array<int64_t, 3>> readInto(int layer, TensorKind kind,
                                                          int sequence, float* out,
                                                          int64_t capacity) const;
  /// Heads [firstHead, firstHead + count) of one layer's tensor of one sequence, as float32
  /// [count, tokens, dim]: the same values as those heads of read() (a hyperslab of the head
  /// range only). Heads are kv heads for K, V and pre-RoPE K, query heads for Q. A range outside
  /// the tensor's heads (or count < 1) is an error naming the file, dataset and range.
  [[nodiscard]] Expected<Tensor3> readHeads(int layer, TensorKind kind, int64_t firstHead, int64_t count,
                                            int sequence = 0) const;
  /// Like readHeads(), into caller memory of `capacity` floats; returns [count, tokens, dim].
  [[nodiscard]] Expected<std::array<int64_t, 3>> readHeadsInto(int layer, TensorKind kind, int64_t firstHead,
                                                               int64_t count, int sequence, float* out,
                                                               int64_t capacity) const;
  /// Token ids of a sequence (empty when the dump has none).
  [[nodiscard]] Expected<std::vector<int64_t>> tokens(int sequence = 0) const;
  /// Token texts of a sequence (empty when the dump has none).
  [[nodiscard]] Expected<std::vector<std::string>> tokenText(int sequence = 0) const;
  /// Which sequences of one layer's tensor have data stored in the file (metadata only).
  [[nodiscard]] Expected<StoredData> storedData(int layer, TensorKind kind) const;
  /// `/logits` [T, vocab] of a sequence, row-major (only when info().hasLogits).
  [[nodiscard]] Expected<std::vector<float>> logits(int sequence = 0) const;

  struct Impl;

 private:
  explicit Dump(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
