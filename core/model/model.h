// SPDX-License-Identifier: GPL-3.0-or-later
// A model as kvscope runs it: a GGUF file, a Hugging Face folder or a llama2.c checkpoint, read
// into one description (hyperparameters, an architecture row, weights by role, a tokenizer).
// The format is recognised from the content, not the name (docs/real-models.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/architecture.h"
#include "core/modelfile/model_format.h"
#include "core/util/status.h"
#include "core/util/vocabulary.h"

namespace kvscope {

class Tokenizer;

/// The short name of a model's format stored in dumps (`model_format`) and JSON: "gguf",
/// "huggingface", "llama2.c".
const char* modelFormatKey(ModelFormat format);

/// RoPE as this model applies it: the pairing and each pair's inverse frequency after scaling.
struct ModelRope {
  RopeStyle style = RopeStyle::Half;
  double theta = 10000.0;            ///< the base (rope.freq_base, rope_theta)
  std::string scaling = "none";      ///< "none", "linear", "llama3" (for model-info and the dump)
  double scalingFactor = 1.0;        ///< linear/llama3 factor
  std::vector<double> invFreq;       ///< [headDim/2] θ_i of pair i, scaling applied: angle = position·θ_i
};

/// The numbers one forward pass needs, read from the model file and checked.
struct ModelHparams {
  int dim = 0;            ///< residual stream width
  int ffn = 0;            ///< feed-forward width
  int layers = 0;
  int heads = 0;          ///< query heads H
  int kvHeads = 0;        ///< key/value heads KVH (H is a multiple)
  int headDim = 0;        ///< D of keys, values and queries (may differ from dim / heads)
  int vocab = 0;
  int contextLength = 0;  ///< the longest sequence the model was trained for
  double rmsEps = 1e-5;
  ModelRope rope;
  bool qkvBias = false;       ///< q/k/v biases present (added before RoPE)
  bool qkNorm = false;        ///< per-head RMSNorm of q and k before RoPE
  bool tiedEmbeddings = true; ///< the embedding table is the classifier
  int slidingWindow = 0;      ///< > 0: attention sees only this many positions (refused beyond it)

  [[nodiscard]] int qDim() const { return heads * headDim; }
  [[nodiscard]] int kvDim() const { return kvHeads * headDim; }
};

/// What model-info shows of one weight.
struct WeightInfo {
  std::string name;          ///< as the file names it
  std::vector<int64_t> shape;///< row-major, slowest first: [rows, cols]
  std::string type;          ///< "f32", "q4_K", "bf16", …
  uint64_t bytes = 0;
};

class ModelWeights;

/// A loaded model: files memory-mapped read-only, validated before any weight is touched.
class Model {
 public:
  /// Recognises and loads a GGUF file, a Hugging Face folder (config.json + safetensors) or a
  /// llama2.c checkpoint. `tokenizerPath` is a llama2.c tokenizer.bin (other formats carry theirs).
  static Expected<std::shared_ptr<const Model>> load(const std::string& path, const std::string& tokenizerPath = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  /// The name shown to users and stored as the dump's `model` (general.name, the folder or file stem).
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] ModelFormat format() const { return format_; }
  [[nodiscard]] const ArchitectureDescription& architecture() const { return *architecture_; }
  [[nodiscard]] const ModelHparams& hparams() const { return hparams_; }
  /// The tokenizer, or nullptr (a llama2.c checkpoint without --tokenizer).
  [[nodiscard]] const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  /// BOS as the model says (llama2.c: 1); empty when it has none.
  [[nodiscard]] std::optional<int> bos() const { return bos_; }
  /// Whether the model's tokenizer adds BOS to a text (llama.cpp's add_bos_token).
  [[nodiscard]] bool addsBos() const { return addsBos_; }

  /// Whether the model can name its tokens (a tokenizer, or a llama2.c tokenizer.bin).
  [[nodiscard]] bool hasTokenText() const;
  /// Token `id`'s text as a dump's /token_text stores it (valid UTF-8; empty without a tokenizer).
  [[nodiscard]] std::string tokenText(int id) const;
  /// The text as token ids, BOS as the model says (needs a tokenizer).
  Expected<std::vector<int>> tokenize(const std::string& text) const;

  /// Whether the model holds a weight for `role` (layer ignored for global roles).
  [[nodiscard]] bool has(TensorRole role, int layer = 0) const;
  /// Rows [first, first + count) of the weight, dequantized to float32 (a vector is one row).
  Status rows(TensorRole role, int layer, int64_t first, int64_t count, float* out) const;
  /// The whole weight as float32.
  Status whole(TensorRole role, int layer, std::vector<float>& out) const;
  /// model-info's view of a weight (name, shape, type, bytes); empty name when absent.
  [[nodiscard]] WeightInfo info(TensorRole role, int layer = 0) const;
  /// Every weight the forward pass reads, in file order of roles (model-info).
  [[nodiscard]] std::vector<WeightInfo> weights() const;
  /// Bytes of the model's files (what the mapping can hold resident).
  [[nodiscard]] uint64_t fileBytes() const;

 private:
  Model();
  friend class ModelLoader;
  /// The file's tokenizer, and BOS as it says.
  void setTokenizer(std::unique_ptr<Tokenizer> tokenizer);
  std::string path_, name_;
  ModelFormat format_ = ModelFormat::Llama2c;
  const ArchitectureDescription* architecture_ = nullptr;
  ModelHparams hparams_;
  std::shared_ptr<const ModelWeights> weights_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<std::string> llama2cPieces_;  ///< a llama2.c tokenizer.bin's pieces, as the file stores them
  std::optional<int> bos_;
  bool addsBos_ = true;
};

}  // namespace kvscope
