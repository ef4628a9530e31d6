// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/model.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/model/checkpoint.h"
#include "core/model/model_weights.h"
#include "core/quant/rope.h"
#include "core/util/small_float.h"

namespace kvscope {

const char* modelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::Gguf: return "gguf";
    case ModelFormat::HuggingFace: return "huggingface";
    case ModelFormat::Llama2c: return "llama2.c";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Weights

namespace {

constexpr int kTypeF32 = 0;
constexpr int kTypeF16 = 1;
constexpr int kTypeBf16 = 30;

}  // namespace

std::string weightTypeName(int type) {
  switch (type) {
    case kTypeF32: return "f32";
    case kTypeF16: return "f16";
    case kTypeBf16: return "bf16";
    default: break;
  }
  return "type " + std::to_string(type);
}

bool weightTypeSupported(int type) { return type == kTypeF32 || type == kTypeF16 || type == kTypeBf16; }

uint64_t weightRowBytes(int type, int64_t cols) {
  switch (type) {
    case kTypeF32: return static_cast<uint64_t>(cols) * 4;
    case kTypeF16:
    case kTypeBf16: return static_cast<uint64_t>(cols) * 2;
    default: break;
  }
  return 0;
}

const WeightSlot* ModelWeights::find(TensorRole role, int layer) const {
  auto it = slots.find({role, isLayerRole(role) ? layer : 0});
  return it == slots.end() ? nullptr : &it->second;
}

Status ModelWeights::rows(const WeightSlot& slot, int64_t first, int64_t count, float* out) const {
  if (first < 0 || count < 0 || first + count > slot.rows())
    return Status::internal("rows [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of " +
                            slot.name + " do not exist");
  const int64_t cols = slot.cols();
  const uint64_t rowBytes = weightRowBytes(slot.type, cols);
  if (rowBytes == 0) return Status::unsupported(slot.name + ": tensor type " + weightTypeName(slot.type) + " is not read");
  const uint8_t* at = slot.data + static_cast<uint64_t>(first) * rowBytes;
  const int64_t n = count * cols;
  switch (slot.type) {
    case kTypeF32: std::memcpy(out, at, static_cast<size_t>(n) * sizeof(float)); break;
    case kTypeF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, at + 2 * i, 2);
        out[i] = fp::fp16Value(h);
      }
      break;
    case kTypeBf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, at + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      break;
    default: return Status::unsupported(slot.name + ": tensor type " + weightTypeName(slot.type) + " is not read");
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Model

Model::Model() = default;
Model::~Model() = default;

bool Model::has(TensorRole role, int layer) const { return weights_->find(role, layer) != nullptr; }

Status Model::rows(TensorRole role, int layer, int64_t first, int64_t count, float* out) const {
  const WeightSlot* slot = weights_->find(role, layer);
  if (slot == nullptr)
    return Status::invalidData(path_ + ": the model has no " + std::string(tensorRoleName(role)) + " tensor" +
                               (isLayerRole(role) ? " in layer " + std::to_string(layer) : std::string()));
  return weights_->rows(*slot, first, count, out);
}

Status Model::whole(TensorRole role, int layer, std::vector<float>& out) const {
  const WeightSlot* slot = weights_->find(role, layer);
  if (slot == nullptr) return rows(role, layer, 0, 0, nullptr);
  out.resize(static_cast<size_t>(slot->rows() * slot->cols()));
  return weights_->rows(*slot, 0, slot->rows(), out.data());
}

WeightInfo Model::info(TensorRole role, int layer) const {
  const WeightSlot* slot = weights_->find(role, layer);
  if (slot == nullptr) return {};
  return {slot->name, slot->shape, weightTypeName(slot->type), slot->bytes};
}

std::vector<WeightInfo> Model::weights() const {
  std::vector<WeightInfo> out;
  for (const auto& [key, slot] : weights_->slots) out.push_back({slot.name, slot.shape, weightTypeName(slot.type), slot.bytes});
  return out;
}

uint64_t Model::fileBytes() const { return weights_->fileBytes; }

bool Model::hasTokenText() const { return tokenizer_ != nullptr || !llama2cPieces_.empty(); }

std::string Model::tokenText(int id) const {
  if (id >= 0 && static_cast<size_t>(id) < llama2cPieces_.size()) return llama2cPieces_[static_cast<size_t>(id)];
  return {};
}

Expected<std::vector<int>> Model::tokenize(const std::string& /*text*/) const {
  return Status::invalidArgument(path_ + ": this model has no tokenizer: give token ids (--tokens) instead of text");
}

// ---------------------------------------------------------------------------------------------
// Loading

class ModelLoader {
 public:
  static Expected<std::shared_ptr<const Model>> llama2c(const std::string& path, const std::string& tokenizerPath);
};

namespace {

/// Each pair's inverse frequency θ^(−2i/D), as core/quant/rope.cpp computes it.
std::vector<double> plainFrequencies(double theta, int headDim) {
  return ropeInverseFrequencies(RopeParams{theta, RopeStyle::Half, {}}, headDim);
}

}  // namespace

Expected<std::shared_ptr<const Model>> ModelLoader::llama2c(const std::string& path, const std::string& tokenizerPath) {
  auto cp = Checkpoint::load(path);
  if (!cp) return cp.status();
  const ModelConfig& c = (*cp)->config();
  std::shared_ptr<Model> m(new Model());
  m->path_ = path;
  m->name_ = std::filesystem::path(path).stem().string();
  m->format_ = ModelFormat::Llama2c;
  m->architecture_ = findArchitecture("llama");
  ModelHparams& hp = m->hparams_;
  hp.dim = c.dim;
  hp.ffn = c.hiddenDim;
  hp.layers = c.layers;
  hp.heads = c.heads;
  hp.kvHeads = c.kvHeads;
  hp.headDim = c.headDim();
  hp.vocab = c.vocabSize;
  hp.contextLength = c.seqLen;
  hp.rmsEps = kRmsNormEps;
  // llama2.c rotates adjacent pairs with θ = 10000 (run.c).
  hp.rope.style = RopeStyle::Interleaved;
  hp.rope.theta = kLlamaRopeTheta;
  hp.rope.invFreq = plainFrequencies(hp.rope.theta, hp.headDim);
  hp.tiedEmbeddings = c.sharedClassifier;
  m->bos_ = kLlama2cBos;
  m->addsBos_ = true;

  auto weights = std::make_shared<ModelWeights>();
  weights->holders.push_back(*cp);
  weights->fileBytes = std::filesystem::file_size(path);
  auto add = [&](TensorRole role, int layer, const float* data, int64_t rows, int64_t cols, const std::string& name) {
    WeightSlot s;
    s.name = name;
    s.shape = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
    s.type = kTypeF32;
    s.data = reinterpret_cast<const uint8_t*>(data);
    s.bytes = static_cast<uint64_t>(rows * cols) * sizeof(float);
    weights->slots[{role, layer}] = s;
  };
  const int64_t dim = c.dim, qDim = hp.qDim(), kvDim = hp.kvDim(), hidden = c.hiddenDim;
  add(TensorRole::TokenEmbedding, 0, (*cp)->tokenEmbedding(), c.vocabSize, dim, "token_embedding_table");
  add(TensorRole::OutputNorm, 0, (*cp)->rmsFinal(), 1, dim, "rms_final_weight");
  if (!c.sharedClassifier) add(TensorRole::Output, 0, (*cp)->classifier(), c.vocabSize, dim, "wcls");
  for (int l = 0; l < c.layers; ++l) {
    const LayerWeights& w = (*cp)->layer(l);
    const std::string at = "[" + std::to_string(l) + "]";
    add(TensorRole::AttnNorm, l, w.rmsAtt, 1, dim, "rms_att_weight" + at);
    add(TensorRole::AttnQ, l, w.wq, qDim, dim, "wq" + at);
    add(TensorRole::AttnK, l, w.wk, kvDim, dim, "wk" + at);
    add(TensorRole::AttnV, l, w.wv, kvDim, dim, "wv" + at);
    add(TensorRole::AttnOutput, l, w.wo, dim, qDim, "wo" + at);
    add(TensorRole::FfnNorm, l, w.rmsFfn, 1, dim, "rms_ffn_weight" + at);
    add(TensorRole::FfnGate, l, w.w1, hidden, dim, "w1" + at);
    add(TensorRole::FfnDown, l, w.w2, dim, hidden, "w2" + at);
    add(TensorRole::FfnUp, l, w.w3, hidden, dim, "w3" + at);
  }
  m->weights_ = std::move(weights);
  if (!tokenizerPath.empty()) {
    auto pieces = loadTokenizer(tokenizerPath, c.vocabSize);
    if (!pieces) return pieces.status();
    m->llama2cPieces_ = std::move(*pieces);
  }
  return std::shared_ptr<const Model>(std::move(m));
}

Expected<std::shared_ptr<const Model>> Model::load(const std::string& path, const std::string& tokenizerPath) {
  return ModelLoader::llama2c(path, tokenizerPath);
}

}  // namespace kvscope
