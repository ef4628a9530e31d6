// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/model/checkpoint.h"
#include "core/model/model_weights.h"
#include "core/modelfile/gguf.h"
#include "core/modelfile/safetensors.h"
#include "core/quant/rope.h"
#include "core/tokenize/tokenizer.h"

namespace kvscope {

const char* modelFormatKey(ModelFormat format) {
  switch (format) {
    case ModelFormat::Gguf: return "gguf";
    case ModelFormat::HfFolder: return "huggingface";
    case ModelFormat::Safetensors: return "safetensors";
    case ModelFormat::Llama2c: return "llama2.c";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Model

Model::Model() = default;
Model::~Model() = default;

bool Model::has(TensorRole role, int layer) const { return weights_->find(role, layer) != nullptr; }

Status Model::rows(TensorRole role, int layer, int64_t first, int64_t count, float* out) const {
  const WeightTensor* t = weights_->find(role, layer);
  if (t == nullptr)
    return Status::invalidData(path_ + ": the model has no " + std::string(tensorRoleName(role)) + " tensor" +
                               (isLayerRole(role) ? " in layer " + std::to_string(layer) : std::string()));
  return dequantizeRows(*t, first, count, out);
}

Status Model::whole(TensorRole role, int layer, std::vector<float>& out) const {
  const WeightTensor* t = weights_->find(role, layer);
  if (t == nullptr) return rows(role, layer, 0, 0, nullptr);
  out.resize(static_cast<size_t>(t->elements()));
  return dequantizeRows(*t, 0, t->rows(), out.data());
}

namespace {

WeightInfo infoOf(const WeightTensor& t) {
  return {t.name, t.shape, ggmlTypeInfo(t.type).name, t.bytes};
}

}  // namespace

WeightInfo Model::info(TensorRole role, int layer) const {
  const WeightTensor* t = weights_->find(role, layer);
  return t == nullptr ? WeightInfo{} : infoOf(*t);
}

std::vector<WeightInfo> Model::weights() const {
  std::vector<WeightInfo> out;
  for (const auto& [key, t] : weights_->tensors) out.push_back(infoOf(t));
  return out;
}

uint64_t Model::fileBytes() const { return weights_->fileBytes; }

void Model::setTokenizer(std::unique_ptr<Tokenizer> tokenizer) {
  tokenizer_ = std::shared_ptr<const Tokenizer>(std::move(tokenizer));
  bos_ = tokenizer_->bos();
  addsBos_ = tokenizer_->addsBos();
}

bool Model::hasTokenText() const { return tokenizer_ != nullptr || !llama2cPieces_.empty(); }

std::string Model::tokenText(int id) const {
  if (tokenizer_) return tokenizer_->tokenText(id);
  if (id >= 0 && static_cast<size_t>(id) < llama2cPieces_.size()) return llama2cPieces_[static_cast<size_t>(id)];
  return {};
}

Expected<std::vector<int>> Model::tokenize(const std::string& text) const {
  if (!tokenizer_)
    return Status::invalidArgument(path_ + ": this model has no tokenizer" +
                                   (format_ == ModelFormat::Llama2c
                                        ? std::string(" (llama2.c tokenizer.bin files hold pieces, not an encoder)")
                                        : std::string()) +
                                   ": give token ids (--tokens) instead of text");
  // As llama-perplexity tokenizes: BOS as the model says, special tokens written in the text
  // stay text (llama.cpp's common_tokenize(…, add_special = true, parse_special = false)).
  auto ids = tokenizer_->encode(text, true, false);
  if (!ids) return ids.status().withContext(path_);
  if (ids->empty()) return Status::invalidArgument("the text tokenizes to no tokens");
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Loading

class ModelLoader {
 public:
  static Expected<std::shared_ptr<const Model>> llama2c(const std::string& path, const std::string& tokenizerPath);
  static Expected<std::shared_ptr<const Model>> gguf(const std::string& path);
  static Expected<std::shared_ptr<const Model>> huggingFace(const std::string& path);
};

namespace {

/// The shape a role must have for these hyperparameters ([rows, cols]; vectors [n]).
std::vector<int64_t> expectedShape(TensorRole role, const ModelHparams& hp) {
  const int64_t dim = hp.dim, q = hp.qDim(), kv = hp.kvDim(), ffn = hp.ffn, D = hp.headDim, V = hp.vocab;
  switch (role) {
    case TensorRole::TokenEmbedding: return {V, dim};
    case TensorRole::OutputNorm: return {dim};
    case TensorRole::Output: return {V, dim};
    case TensorRole::RopeFrequencies: return {D / 2};
    case TensorRole::AttnNorm: return {dim};
    case TensorRole::AttnQ: return {q, dim};
    case TensorRole::AttnK: return {kv, dim};
    case TensorRole::AttnV: return {kv, dim};
    case TensorRole::AttnOutput: return {dim, q};
    case TensorRole::AttnQBias: return {q};
    case TensorRole::AttnKBias: return {kv};
    case TensorRole::AttnVBias: return {kv};
    case TensorRole::AttnQNorm: return {D};
    case TensorRole::AttnKNorm: return {D};
    case TensorRole::FfnNorm: return {dim};
    case TensorRole::FfnGate: return {ffn, dim};
    case TensorRole::FfnUp: return {ffn, dim};
    case TensorRole::FfnDown: return {dim, ffn};
  }
  return {};
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

constexpr TensorRole kLayerRoles[] = {TensorRole::AttnNorm, TensorRole::AttnQ,     TensorRole::AttnK,
                                      TensorRole::AttnV,    TensorRole::AttnOutput, TensorRole::FfnNorm,
                                      TensorRole::FfnGate,  TensorRole::FfnUp,     TensorRole::FfnDown};
constexpr TensorRole kBiasRoles[] = {TensorRole::AttnQBias, TensorRole::AttnKBias, TensorRole::AttnVBias};
constexpr TensorRole kNormRoles[] = {TensorRole::AttnQNorm, TensorRole::AttnKNorm};

/// Collects a model's tensors by role from a file, checking presence, shapes and types before any
/// weight is touched. `name(role, layer)` is the file's naming.
class TensorCollector {
 public:
  TensorCollector(const WeightSource& source, const ModelHparams& hp, const ArchitectureDescription& arch,
                  std::string (*name)(TensorRole, int), ModelWeights& out)
      : source_(source), hp_(hp), arch_(arch), name_(name), out_(out) {}

  /// Takes the tensor when present; refuses a required one that is missing.
  Expected<bool> take(TensorRole role, int layer, bool required) {
    const std::string n = name_(role, layer);
    if (!source_.hasWeight(n)) {
      if (!required) return false;
      return Status::invalidData(source_.path() + ": tensor '" + n + "' is missing (a " + std::string(arch_.name) +
                                 " model has one in every layer)");
    }
    auto t = source_.weight(n);
    if (!t) return t.status();
    KVS_RETURN_IF_ERROR(checkReadable(*t));
    const std::vector<int64_t> expected = expectedShape(role, hp_);
    std::vector<int64_t> shape = t->shape;
    if (shape != expected)
      return Status::invalidData(source_.path() + ": tensor '" + n + "' has shape " + shapeText(shape) + "; a " +
                                 std::string(arch_.name) + " model with these hyperparameters needs " +
                                 shapeText(expected));
    out_.tensors[{role, isLayerRole(role) ? layer : 0}] = std::move(*t);
    return true;
  }

  /// Every tensor of the model; refuses biases or q/k norms the family does not have. A family
  /// with optional biases takes them where the file has them (llama.cpp's rule for GGUF) when
  /// `biasesFromFile`, else exactly when hp.qkvBias says (Hugging Face's attention_bias).
  Status collect(ModelHparams& hp, bool biasesFromFile) {
    KVS_RETURN_IF_ERROR(take(TensorRole::TokenEmbedding, 0, true).status());
    KVS_RETURN_IF_ERROR(take(TensorRole::OutputNorm, 0, true).status());
    if (!hp.tiedEmbeddings) KVS_RETURN_IF_ERROR(take(TensorRole::Output, 0, true).status());
    bool anyBias = false;
    for (int l = 0; l < hp.layers; ++l) {
      for (TensorRole r : kLayerRoles) KVS_RETURN_IF_ERROR(take(r, l, true).status());
      for (TensorRole r : kBiasRoles) {
        if (arch_.qkvBias == BiasRule::Never) {
          if (source_.hasWeight(name_(r, l)))
            return Status::invalidData(source_.path() + ": tensor '" + name_(r, l) + "': a " + std::string(arch_.name) +
                                       " model has no q/k/v biases (is the architecture in the file right?)");
          continue;
        }
        const bool required = arch_.qkvBias == BiasRule::Always || hp.qkvBias;
        if (!required && !biasesFromFile) continue;
        auto got = take(r, l, required);
        if (!got) return got.status();
        anyBias = anyBias || *got;
      }
      for (TensorRole r : kNormRoles) {
        if (!arch_.qkNorm) continue;
        KVS_RETURN_IF_ERROR(take(r, l, true).status());
      }
    }
    hp.qkvBias = hp.qkvBias || anyBias;
    hp.qkNorm = arch_.qkNorm;
    return Status::ok();
  }

 private:
  const WeightSource& source_;
  const ModelHparams& hp_;
  const ArchitectureDescription& arch_;
  std::string (*name_)(TensorRole, int);
  ModelWeights& out_;
};

/// Shared checks of the hyperparameters from any file; `where` prefixes the messages.
Status checkHparams(const ModelHparams& hp, const std::string& where) {
  auto bad = [&](const std::string& what) { return Status::invalidData(where + ": " + what); };
  if (hp.layers < 1 || hp.layers > 4096) return bad("layer count " + std::to_string(hp.layers) + " is outside 1-4096");
  if (hp.dim < 1 || hp.dim > (1 << 18)) return bad("hidden size " + std::to_string(hp.dim) + " is outside 1-262144");
  if (hp.ffn < 1 || hp.ffn > (1 << 20)) return bad("feed-forward size " + std::to_string(hp.ffn) + " is outside 1-1048576");
  if (hp.heads < 1 || hp.heads > 4096) return bad("head count " + std::to_string(hp.heads) + " is outside 1-4096");
  if (hp.kvHeads < 1 || hp.heads % hp.kvHeads != 0)
    return bad("kv head count " + std::to_string(hp.kvHeads) + " does not divide the head count " +
               std::to_string(hp.heads));
  if (hp.headDim < 2 || hp.headDim % 2 != 0 || hp.headDim > 4096)
    return bad("head dim " + std::to_string(hp.headDim) + " must be even and between 2 and 4096 (RoPE rotates pairs)");
  if (hp.vocab < 1) return bad("the vocabulary is empty");
  if (hp.contextLength < 1) return bad("context length " + std::to_string(hp.contextLength) + " must be positive");
  if (!(hp.rmsEps > 0) || !std::isfinite(hp.rmsEps) || hp.rmsEps > 1)
    return bad("RMSNorm epsilon " + std::to_string(hp.rmsEps) + " must be in (0, 1]");
  if (!(hp.rope.theta > 0) || !std::isfinite(hp.rope.theta)) return bad("RoPE base must be a positive number");
  for (double f : hp.rope.invFreq) {
    if (!(f > 0) || !std::isfinite(f)) return bad("a RoPE frequency is not a positive finite number");
  }
  return Status::ok();
}

/// θ^(−2i/D) for every pair, exactly as core/quant/rope.cpp computes it.
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
  std::error_code ec;
  weights->fileBytes = std::filesystem::file_size(path, ec);
  // The checkpoint names its weights as llama.cpp's convert-llama2c-to-ggml does: GGUF's names.
  TensorCollector collect(**cp, hp, *m->architecture_, &ggufTensorName, *weights);
  KVS_RETURN_IF_ERROR(collect.collect(hp, false));
  m->weights_ = std::move(weights);
  if (!tokenizerPath.empty()) {
    auto pieces = loadTokenizer(tokenizerPath, c.vocabSize);
    if (!pieces) return pieces.status();
    // Pieces as the file stores them, made valid UTF-8 for /token_text (the tokenize rule).
    for (const std::string& p : *pieces) m->llama2cPieces_.push_back(displayableText(p));
  }
  return std::shared_ptr<const Model>(std::move(m));
}

namespace {

Status archRefusal(const std::string& where, const std::string& name) {
  const std::string_view why = refusedArchitectureReason(name);
  return Status::unsupported(where + ": architecture '" + name + "' is not supported" +
                             (why.empty() ? std::string() : " (" + std::string(why) + ")") + "; kvscope runs " +
                             architectureList());
}

/// An integer hyperparameter in [lo, hi], or `fallback` when absent (required when no fallback).
Expected<int> ggufInt(const GgufFile& f, const std::string& key, int lo, int hi, std::optional<int> fallback = {}) {
  auto v = fallback ? f.getIntOr(key, *fallback) : f.getInt(key);
  if (!v) return v.status();
  if (*v < lo || *v > hi)
    return Status::invalidData(f.path() + ": key '" + key + "' is " + std::to_string(*v) + "; expected " +
                               std::to_string(lo) + "-" + std::to_string(hi));
  return static_cast<int>(*v);
}

Expected<std::unique_ptr<Tokenizer>> ggufTokenizer(const GgufFile& f) {
  VocabularyData v;
  auto model = f.getString("tokenizer.ggml.model");
  if (!model) return model.status();
  v.model = *model;
  auto pre = f.getStringOr("tokenizer.ggml.pre", "");
  if (!pre) return pre.status();
  v.pre = *pre;
  auto tokens = f.getStringArray("tokenizer.ggml.tokens");
  if (!tokens) return tokens.status();
  v.tokens = std::move(*tokens);
  if (f.find("tokenizer.ggml.scores") != nullptr) {
    auto scores = f.getFloatArray("tokenizer.ggml.scores");
    if (!scores) return scores.status();
    v.scores.assign(scores->begin(), scores->end());
  }
  if (f.find("tokenizer.ggml.token_type") != nullptr) {
    auto types = f.getIntArray("tokenizer.ggml.token_type");
    if (!types) return types.status();
    for (int64_t t : *types) v.tokenTypes.push_back(static_cast<int32_t>(std::clamp<int64_t>(t, INT32_MIN, INT32_MAX)));
  }
  if (f.find("tokenizer.ggml.merges") != nullptr) {
    auto merges = f.getStringArray("tokenizer.ggml.merges");
    if (!merges) return merges.status();
    v.merges = std::move(*merges);
  }
  const std::pair<const char*, std::optional<int>*> ids[] = {{"tokenizer.ggml.bos_token_id", &v.bos},
                                                              {"tokenizer.ggml.eos_token_id", &v.eos},
                                                              {"tokenizer.ggml.unknown_token_id", &v.unk},
                                                              {"tokenizer.ggml.padding_token_id", &v.pad}};
  for (const auto& [key, out] : ids) {
    if (f.find(key) == nullptr) continue;
    auto id = f.getInt(key);
    if (!id) return id.status();
    if (*id < 0 || *id > INT32_MAX)
      return Status::invalidData(f.path() + ": key '" + key + "' is " + std::to_string(*id) + ", not a token id");
    *out = static_cast<int>(*id);
  }
  const std::pair<const char*, std::optional<bool>*> flags[] = {{"tokenizer.ggml.add_bos_token", &v.addBos},
                                                                 {"tokenizer.ggml.add_eos_token", &v.addEos},
                                                                 {"tokenizer.ggml.add_space_prefix", &v.addSpacePrefix}};
  for (const auto& [key, out] : flags) {
    if (f.find(key) == nullptr) continue;
    auto b = f.getBool(key);
    if (!b) return b.status();
    *out = *b;
  }
  return tokenizerFromGguf(v, f.path());
}

}  // namespace

Expected<std::shared_ptr<const Model>> ModelLoader::gguf(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.status();
  const GgufFile& f = **file;
  auto archName = f.getString("general.architecture");
  if (!archName) return archName.status();
  const ArchitectureDescription* arch = findArchitecture(*archName);
  if (arch == nullptr) return archRefusal(path, *archName);
  const std::string a = *archName;
  std::shared_ptr<Model> m(new Model());
  m->path_ = path;
  m->format_ = ModelFormat::Gguf;
  m->architecture_ = arch;
  auto name = f.getStringOr("general.name", std::filesystem::path(path).stem().string());
  if (!name) return name.status();
  m->name_ = *name;
  ModelHparams& hp = m->hparams_;
  auto setInt = [&](int& out, const std::string& key, int lo, int hi, std::optional<int> fallback = {}) -> Status {
    auto v = ggufInt(f, a + "." + key, lo, hi, fallback);
    if (!v) return v.status();
    out = *v;
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(setInt(hp.layers, "block_count", 1, 4096));
  KVS_RETURN_IF_ERROR(setInt(hp.dim, "embedding_length", 1, 1 << 18));
  KVS_RETURN_IF_ERROR(setInt(hp.ffn, "feed_forward_length", 1, 1 << 20));
  KVS_RETURN_IF_ERROR(setInt(hp.heads, "attention.head_count", 1, 4096));
  KVS_RETURN_IF_ERROR(setInt(hp.kvHeads, "attention.head_count_kv", 1, 4096, hp.heads));
  KVS_RETURN_IF_ERROR(setInt(hp.contextLength, "context_length", 1, 1 << 24));
  if (f.find(a + ".attention.key_length") == nullptr && hp.dim % hp.heads != 0)
    return Status::invalidData(path + ": " + a + ".embedding_length " + std::to_string(hp.dim) +
                               " is not a multiple of the head count and no attention.key_length says the head dim");
  KVS_RETURN_IF_ERROR(setInt(hp.headDim, "attention.key_length", 1, 4096, hp.dim / hp.heads));
  int valueDim = 0, ropeDims = 0;
  KVS_RETURN_IF_ERROR(setInt(valueDim, "attention.value_length", 1, 4096, hp.headDim));
  if (valueDim != hp.headDim)
    return Status::unsupported(path + ": value head dim " + std::to_string(valueDim) + " differs from the key's " +
                               std::to_string(hp.headDim) + " (a KV dump holds keys and values of one head dim)");
  KVS_RETURN_IF_ERROR(setInt(ropeDims, "rope.dimension_count", 1, 4096, hp.headDim));
  if (ropeDims != hp.headDim)
    return Status::unsupported(path + ": " + a + ".rope.dimension_count " + std::to_string(ropeDims) +
                               " rotates part of each head of " + std::to_string(hp.headDim) +
                               " (partial RoPE is not supported)");
  auto eps = f.getFloat(a + ".attention.layer_norm_rms_epsilon");
  if (!eps) return eps.status();
  hp.rmsEps = *eps;
  auto theta = f.getFloatOr(a + ".rope.freq_base", 10000.0);
  if (!theta) return theta.status();
  hp.rope.theta = *theta;
  hp.rope.style = arch->ggufRope;
  // RoPE scaling as llama.cpp reads it: rope.scaling.type linear (freq_scale = 1/factor), and
  // Llama 3's per-pair divisors in rope_freqs.weight (its converter writes them).
  auto scaling = f.getStringOr(a + ".rope.scaling.type", "none");
  if (!scaling) return scaling.status();
  double freqScale = 1.0;
  if (*scaling == "linear") {
    auto factor = f.getFloat(a + ".rope.scaling.factor");
    if (!factor) return factor.status();
    if (!(*factor > 0) || !std::isfinite(*factor))
      return Status::invalidData(path + ": key '" + a + ".rope.scaling.factor' must be a positive number");
    freqScale = 1.0 / *factor;
    hp.rope.scaling = "linear";
    hp.rope.scalingFactor = *factor;
  } else if (*scaling != "none") {
    return Status::unsupported(path + ": " + a + ".rope.scaling.type '" + *scaling +
                               "' is not supported (kvscope applies none, linear and Llama 3's rope_freqs)");
  }
  hp.rope.invFreq = plainFrequencies(hp.rope.theta, hp.headDim);
  for (double& v : hp.rope.invFreq) v *= freqScale;
  const GgufTensorInfo* embd = f.findTensor("token_embd.weight");
  if (embd == nullptr) return Status::invalidData(path + ": tensor 'token_embd.weight' is missing");
  const std::vector<int64_t> embShape = embd->shape();
  if (embShape.size() != 2 || embShape[0] < 1 || embShape[0] > (1 << 24))
    return Status::invalidData(path + ": tensor 'token_embd.weight' has shape " + shapeText(embShape) +
                               "; expected [vocabulary, embedding_length]");
  hp.vocab = static_cast<int>(embShape[0]);
  hp.tiedEmbeddings = f.findTensor("output.weight") == nullptr;
  KVS_RETURN_IF_ERROR(checkHparams(hp, path));

  auto weights = std::make_shared<ModelWeights>();
  weights->holders.push_back(*file);
  weights->fileBytes = f.file().size();
  TensorCollector collect(f, hp, *arch, &ggufTensorName, *weights);
  KVS_RETURN_IF_ERROR(collect.collect(hp, true));
  if (f.findTensor("rope_freqs.weight") != nullptr) {
    auto ff = collect.take(TensorRole::RopeFrequencies, 0, true);
    if (!ff) return ff.status();
    std::vector<float> divisors(static_cast<size_t>(hp.headDim / 2));
    KVS_RETURN_IF_ERROR(dequantizeRows(*weights->find(TensorRole::RopeFrequencies, 0), 0, 1, divisors.data()));
    for (size_t i = 0; i < divisors.size(); ++i) {
      if (!(divisors[i] > 0) || !std::isfinite(divisors[i]))
        return Status::invalidData(path + ": tensor 'rope_freqs.weight' holds a factor that is not positive");
      hp.rope.invFreq[i] /= divisors[i];
    }
    hp.rope.scaling = hp.rope.scaling == "none" ? "llama3" : hp.rope.scaling + "+rope_freqs";
  }
  m->weights_ = std::move(weights);
  if (f.find("tokenizer.ggml.model") != nullptr) {
    auto tok = ggufTokenizer(f);
    if (!tok) return tok.status();
    m->setTokenizer(std::move(*tok));
  }
  return std::shared_ptr<const Model>(std::move(m));
}

namespace {

/// config.json's integer `key` in [lo, hi]; `fallback` when absent or null.
Expected<int> configInt(const nlohmann::json& c, const std::string& where, const char* key, int lo, int hi,
                        std::optional<int> fallback = {}) {
  if (!c.contains(key) || c[key].is_null()) {
    if (fallback) return *fallback;
    return Status::invalidData(where + ": '" + key + "' is missing");
  }
  if (!c[key].is_number_integer())
    return Status::invalidData(where + ": '" + key + "' must be an integer, found " + c[key].dump());
  const int64_t v = c[key].get<int64_t>();
  if (v < lo || v > hi)
    return Status::invalidData(where + ": '" + key + "' is " + std::to_string(v) + "; expected " + std::to_string(lo) +
                               "-" + std::to_string(hi));
  return static_cast<int>(v);
}

Expected<double> configNumber(const nlohmann::json& c, const std::string& where, const char* key,
                              std::optional<double> fallback = {}) {
  if (!c.contains(key) || c[key].is_null()) {
    if (fallback) return *fallback;
    return Status::invalidData(where + ": '" + key + "' is missing");
  }
  if (!c[key].is_number()) return Status::invalidData(where + ": '" + key + "' must be a number, found " + c[key].dump());
  const double v = c[key].get<double>();
  if (!std::isfinite(v)) return Status::invalidData(where + ": '" + key + "' is not finite");
  return v;
}

/// Hugging Face's RoPE scaling (transformers' modeling_rope_utils): linear divides every
/// frequency by the factor; llama3 divides the low frequencies by it and blends in between.
Status hfRopeScaling(const nlohmann::json& c, const std::string& where, ModelRope& rope) {
  if (!c.contains("rope_scaling") || c["rope_scaling"].is_null()) return Status::ok();
  const nlohmann::json& s = c["rope_scaling"];
  if (!s.is_object()) return Status::invalidData(where + ": 'rope_scaling' must be an object or null");
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (s.contains(k) && s[k].is_string()) {
      type = s[k].get<std::string>();
      break;
    }
  }
  if (type == "default" || type.empty()) return Status::ok();
  auto factor = configNumber(s, where + ": rope_scaling", "factor");
  if (!factor) return factor.status();
  if (!(*factor > 0)) return Status::invalidData(where + ": rope_scaling.factor must be positive");
  rope.scalingFactor = *factor;
  if (type == "linear") {
    for (double& f : rope.invFreq) f /= *factor;
    rope.scaling = "linear";
    return Status::ok();
  }
  if (type == "llama3") {
    auto low = configNumber(s, where + ": rope_scaling", "low_freq_factor");
    auto high = configNumber(s, where + ": rope_scaling", "high_freq_factor");
    auto original = configNumber(s, where + ": rope_scaling", "original_max_position_embeddings");
    for (const auto* v : {&low, &high, &original}) {
      if (!*v) return v->status();
    }
    if (!(*high > *low) || !(*low > 0) || !(*original > 0))
      return Status::invalidData(where + ": rope_scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
                                         "original_max_position_embeddings");
    const double lowWavelen = *original / *low, highWavelen = *original / *high;
    for (double& f : rope.invFreq) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen > lowWavelen) {
        f /= *factor;
      } else if (!(wavelen < highWavelen)) {
        const double smooth = (*original / wavelen - *low) / (*high - *low);
        f = (1 - smooth) * f / *factor + smooth * f;
      }
    }
    rope.scaling = "llama3";
    return Status::ok();
  }
  return Status::unsupported(where + ": rope_scaling type '" + type +
                             "' is not supported (kvscope applies default, linear and llama3)");
}

}  // namespace

Expected<std::shared_ptr<const Model>> ModelLoader::huggingFace(const std::string& path) {
  auto ck = HfCheckpoint::open(path);
  if (!ck) return ck.status();
  const std::string where = (std::filesystem::path(path) / "config.json").string();
  const nlohmann::json& c = (*ck)->config();
  const ArchitectureDescription* arch = nullptr;
  std::string named;
  if (c.contains("architectures") && c["architectures"].is_array()) {
    for (const auto& e : c["architectures"]) {
      if (!e.is_string()) continue;
      named = e.get<std::string>();
      arch = findHfArchitecture(named);
      if (arch != nullptr) break;
    }
  }
  if (arch == nullptr) {
    if (named.empty()) return Status::invalidData(where + ": 'architectures' names no model class");
    std::string known;
    for (const ArchitectureDescription& a : architectures())
      for (std::string_view n : a.hfNames) known += (known.empty() ? "" : ", ") + std::string(n);
    const std::string type = c.contains("model_type") && c["model_type"].is_string() ? c["model_type"].get<std::string>() : "";
    const std::string_view why = refusedArchitectureReason(type);
    return Status::unsupported(where + ": architecture '" + named + "' is not supported" +
                               (why.empty() ? std::string() : " (" + std::string(why) + ")") + "; kvscope runs " + known);
  }
  std::shared_ptr<Model> m(new Model());
  m->path_ = path;
  m->format_ = ModelFormat::HfFolder;
  m->architecture_ = arch;
  m->name_ = std::filesystem::path(path).lexically_normal().filename().string();
  if (m->name_.empty()) m->name_ = std::filesystem::path(path).lexically_normal().parent_path().filename().string();
  ModelHparams& hp = m->hparams_;
  auto setInt = [&](int& out, const char* key, int lo, int hi, std::optional<int> fallback = {}) -> Status {
    auto v = configInt(c, where, key, lo, hi, fallback);
    if (!v) return v.status();
    out = *v;
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(setInt(hp.dim, "hidden_size", 1, 1 << 18));
  KVS_RETURN_IF_ERROR(setInt(hp.ffn, "intermediate_size", 1, 1 << 20));
  KVS_RETURN_IF_ERROR(setInt(hp.layers, "num_hidden_layers", 1, 4096));
  KVS_RETURN_IF_ERROR(setInt(hp.heads, "num_attention_heads", 1, 4096));
  KVS_RETURN_IF_ERROR(setInt(hp.kvHeads, "num_key_value_heads", 1, 4096, hp.heads));
  KVS_RETURN_IF_ERROR(setInt(hp.headDim, "head_dim", 1, 4096, hp.dim / hp.heads));
  KVS_RETURN_IF_ERROR(setInt(hp.contextLength, "max_position_embeddings", 1, 1 << 24));
  int vocab = 0;
  KVS_RETURN_IF_ERROR(setInt(vocab, "vocab_size", 1, 1 << 24));
  auto eps = configNumber(c, where, "rms_norm_eps");
  if (!eps) return eps.status();
  hp.rmsEps = *eps;
  auto theta = configNumber(c, where, "rope_theta", 10000.0);
  if (!theta) return theta.status();
  hp.rope.theta = *theta;
  // Every Hugging Face family here rotates half split (`rotate_half`).
  hp.rope.style = RopeStyle::Half;
  hp.rope.invFreq = plainFrequencies(hp.rope.theta, hp.headDim);
  KVS_RETURN_IF_ERROR(hfRopeScaling(c, where, hp.rope));
  if (c.contains("partial_rotary_factor") && c["partial_rotary_factor"].is_number() &&
      c["partial_rotary_factor"].get<double>() != 1.0)
    return Status::unsupported(where + ": partial_rotary_factor " + c["partial_rotary_factor"].dump() +
                               " rotates part of each head (partial RoPE is not supported)");
  hp.tiedEmbeddings = c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean()
                          ? c["tie_word_embeddings"].get<bool>()
                          : !(*ck)->hasWeight("lm_head.weight");
  if (!hp.tiedEmbeddings && !(*ck)->hasWeight("lm_head.weight"))
    return Status::invalidData(path + ": tie_word_embeddings is false but there is no lm_head.weight");
  hp.qkvBias = c.contains("attention_bias") && c["attention_bias"].is_boolean() && c["attention_bias"].get<bool>();
  if (hp.qkvBias && arch->qkvBias == BiasRule::Never)
    return Status::unsupported(where + ": attention_bias is true, and a " + std::string(arch->name) +
                               " model in kvscope has no q/k/v biases");
  const bool sliding = (!c.contains("use_sliding_window") || !c["use_sliding_window"].is_boolean() ||
                        c["use_sliding_window"].get<bool>()) &&
                       c.contains("sliding_window") && c["sliding_window"].is_number_integer();
  if (sliding) hp.slidingWindow = c["sliding_window"].get<int>();
  auto emb = (*ck)->weight("model.embed_tokens.weight");
  if (!emb) return emb.status();
  if (emb->shape.size() != 2) return Status::invalidData(path + ": model.embed_tokens.weight is not a matrix");
  hp.vocab = static_cast<int>(emb->shape[0]);
  if (hp.vocab != vocab)
    return Status::invalidData(path + ": model.embed_tokens.weight has " + std::to_string(hp.vocab) +
                               " rows, config.json's vocab_size is " + std::to_string(vocab));
  KVS_RETURN_IF_ERROR(checkHparams(hp, where));

  auto weights = std::make_shared<ModelWeights>();
  weights->holders.push_back(*ck);
  for (const auto& file : (*ck)->files()) {
    std::error_code ec;
    weights->fileBytes += std::filesystem::file_size(file->path(), ec);
  }
  TensorCollector collect(**ck, hp, *arch, &hfTensorName, *weights);
  KVS_RETURN_IF_ERROR(collect.collect(hp, false));
  m->weights_ = std::move(weights);
  const std::filesystem::path tokenizerJson = std::filesystem::path(path) / "tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tokenizerJson, ec)) {
    auto tok = loadTokenizerJson(path);
    if (!tok) return tok.status();
    m->setTokenizer(std::move(*tok));
  }
  return std::shared_ptr<const Model>(std::move(m));
}

Expected<std::shared_ptr<const Model>> Model::load(const std::string& path, const std::string& tokenizerPath) {
  auto format = detectModelFormat(path);
  if (!format) return format.status();
  if (!tokenizerPath.empty() && *format != ModelFormat::Llama2c)
    return Status::invalidArgument("--tokenizer " + tokenizerPath + ": a llama2.c tokenizer.bin goes with a llama2.c "
                                   "checkpoint; " + std::string(modelFormatName(*format)) + " models carry their own");
  switch (*format) {
    case ModelFormat::Gguf: return ModelLoader::gguf(path);
    case ModelFormat::HfFolder: return ModelLoader::huggingFace(path);
    case ModelFormat::Safetensors:
      return Status::invalidArgument(path + ": a .safetensors file alone has no config.json: give the Hugging Face "
                                            "folder that holds it and its config.json");
    case ModelFormat::Llama2c: return ModelLoader::llama2c(path, tokenizerPath);
  }
  return Status::internal("unknown model format");
}

}  // namespace kvscope
