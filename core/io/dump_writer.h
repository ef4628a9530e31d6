// SPDX-License-Identifier: GPL-3.0-or-later
// Writing canonical KV dumps (../shared/spec/dump-format.md), streaming layer by layer so a dump
// far larger than memory can be written. Nothing appears at the target path until finish().
//
// Use:
//   DumpWriterOptions o;  o.layers = L; o.kvHeads = KVH; o.tokens = T; o.headDim = D;
//   o.heads = H; o.queries = Tq;        // both 0: no query datasets
//   auto w = DumpWriter::create("out.h5", o);   if (!w) return w.status();
//   for (int l = 0; l < L; ++l) { (*w)->write(l, TensorKind::Key, k); (*w)->write(l,
//   TensorKind::Value, v); ... } return (*w)->finish();              // checks everything declared
//   was written, then renames
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Element type of the tensors on disk.
enum class DiskType { Float16, Float32 };

/// "fp16" / "fp32".
const char* diskTypeName(DiskType type);

/// What the dump will hold; every declared dataset must be written before finish().
struct DumpWriterOptions {
  int layers = 0;              ///< L
  int kvHeads = 0;             ///< KVH
  int tokens = 0;              ///< T
  int headDim = 0;             ///< D
  int heads = 0;               ///< H (query heads, a multiple of KVH); 0 = no `query`
  int queries = 0;             ///< Tq (1 ≤ Tq ≤ T); 0 = no `query`
  bool keyPreRope = false;     ///< also write `key_pre_rope`
  int sequences = 1;           ///< B
  bool batchAxis = false;      ///< leading [B, …] axis even when B = 1 (always used when B > 1)
  bool withTokens = false;     ///< `/tokens` int64 [T] / [B, T]
  bool withTokenText = false;  ///< `/token_text` UTF-8 strings [T] / [B, T]
  int64_t logitsVocab = 0;     ///< > 0: `/logits` float32 [T, vocab] / [B, T, vocab]
  DiskType dtype = DiskType::Float16;                   ///< fp16 is rounded to nearest even
  std::string model;                                    ///< `model` attribute (omitted when empty)
  std::optional<double> ropeTheta;                      ///< `rope_theta` (omitted when unset)
  std::optional<RopeStyle> ropeStyle;                   ///< `rope_style` (omitted when unset)
  std::optional<double> softmaxScale;                   ///< `softmax_scale` (omitted when unset)
  std::vector<double> ropeInvFreq;                      ///< `rope_inv_freq` [D/2] (omitted when empty)
  std::map<std::string, std::string> stringAttributes;  ///< extra root strings, e.g. model_path
  /// Asked between blocks of about 1 MiB of every write (the fraction is that of the write);
  /// returning false stops the write with Status::cancelled(), so Ctrl-C is honoured quickly.
  Progress cancel;
};

/// Streams a canonical dump to a temporary file beside `path`; finish() renames it into place.
/// Destroying a writer without a successful finish() removes the temporary file, leaving any
/// previous file at `path` untouched. Not thread-safe (one writer, one thread).
class DumpWriter {
 public:
  /// Validates `options`, creates the temporary file and every dataset (no data yet).
  static Expected<std::unique_ptr<DumpWriter>> create(const std::string& path,
                                                      const DumpWriterOptions& options);
  ~DumpWriter();
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  /// Writes one layer's tensor of one sequence: [KVH, T, D] for key/value/key_pre_rope,
  /// [H, Tq, D] for query.
  Status write(int layer, TensorKind kind, const Tensor3& tensor, int sequence = 0);
  /// Writes one layer's tensor for all sequences at once (`perSequence.size()` == B).
  Status writeAllSequences(int layer, TensorKind kind, const std::vector<Tensor3>& perSequence);
  /// Token ids of one sequence (T values).
  Status writeTokens(const std::vector<int64_t>& ids, int sequence = 0);
  /// Token texts of one sequence (T strings, UTF-8).
  Status writeTokenText(const std::vector<std::string>& text, int sequence = 0);
  /// Logits of one sequence, row-major [T, vocab].
  Status writeLogits(const std::vector<float>& logits, int sequence = 0);
  /// Checks that every declared dataset was written, closes the file and renames it into place.
  Status finish();

  /// The final path.
  [[nodiscard]] const std::string& path() const;

  struct Impl;

 private:
  explicit DumpWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
