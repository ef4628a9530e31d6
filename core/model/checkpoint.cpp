// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/checkpoint.h"

#include <cstring>
#include <initializer_list>

namespace kvscope {
namespace {

constexpr uint64_t kHeaderBytes = 7 * sizeof(int32_t);

// Overflow-checked a*b*... on uint64; false when the product does not fit.
bool checkedProduct(std::initializer_list<uint64_t> factors, uint64_t& out) {
  uint64_t p = 1;
  for (uint64_t f : factors) {
    if (f != 0 && p > UINT64_MAX / f) return false;
    p *= f;
  }
  out = p;
  return true;
}

bool checkedAdd(uint64_t& acc, uint64_t v) {
  if (acc > UINT64_MAX - v) return false;
  acc += v;
  return true;
}

// The float counts of every weight tensor in file order; shared with the pointer layout below.
struct WeightCounts {
  uint64_t embedding, rmsAtt, wq, wk, wv, wo, rmsFfn, w1, w2, w3, rmsFinal, freqCis, classifier;
};

Expected<WeightCounts> weightCounts(const ModelConfig& c) {
  const uint64_t dim = static_cast<uint64_t>(c.dim), hidden = static_cast<uint64_t>(c.hiddenDim),
                 layers = static_cast<uint64_t>(c.layers), vocab = static_cast<uint64_t>(c.vocabSize),
                 seq = static_cast<uint64_t>(c.seqLen), hd = static_cast<uint64_t>(c.headDim()),
                 heads = static_cast<uint64_t>(c.heads), kvHeads = static_cast<uint64_t>(c.kvHeads);
  WeightCounts w{};
  bool ok = checkedProduct({vocab, dim}, w.embedding) && checkedProduct({layers, dim}, w.rmsAtt) &&
            checkedProduct({layers, dim, heads, hd}, w.wq) &&
            checkedProduct({layers, dim, kvHeads, hd}, w.wk) &&
            checkedProduct({layers, dim, kvHeads, hd}, w.wv) &&
            checkedProduct({layers, heads, hd, dim}, w.wo) && checkedProduct({layers, dim}, w.rmsFfn) &&
            checkedProduct({layers, dim, hidden}, w.w1) && checkedProduct({layers, hidden, dim}, w.w2) &&
            checkedProduct({layers, dim, hidden}, w.w3) && checkedProduct({dim}, w.rmsFinal) &&
            checkedProduct({seq, hd}, w.freqCis);  // real and imaginary parts, seq*hd/2 each
  if (!ok) return Status::invalidData("the header's sizes overflow 64-bit arithmetic");
  w.classifier = c.sharedClassifier ? 0 : w.embedding;
  return w;
}

std::string describe(const ModelConfig& c) {
  return "dim=" + std::to_string(c.dim) + " hidden_dim=" + std::to_string(c.hiddenDim) +
         " n_layers=" + std::to_string(c.layers) + " n_heads=" + std::to_string(c.heads) +
         " n_kv_heads=" + std::to_string(c.kvHeads) + " vocab_size=" +
         std::to_string(c.sharedClassifier ? c.vocabSize : -c.vocabSize) +
         " seq_len=" + std::to_string(c.seqLen);
}

}  // namespace

Status validateConfig(const ModelConfig& c) {
  auto bad = [&](const std::string& what) {
    return Status::invalidData("not a llama2.c checkpoint header (" + describe(c) + "): " + what);
  };
  if (c.dim <= 0 || c.hiddenDim <= 0 || c.layers <= 0 || c.heads <= 0 || c.kvHeads <= 0 ||
      c.vocabSize <= 0 || c.seqLen <= 0)
    return bad("every value must be positive (vocab_size may be negative to mark a separate classifier)");
  if (c.dim % c.heads != 0) return bad("dim is not a multiple of n_heads");
  if (c.heads % c.kvHeads != 0) return bad("n_heads is not a multiple of n_kv_heads");
  if (c.headDim() % 2 != 0) return bad("the head size dim/n_heads must be even for RoPE");
  // Generous limits that no real llama2.c model exceeds, so garbage headers fail early.
  if (c.dim > (1 << 16) || c.hiddenDim > (1 << 18) || c.layers > 1024 || c.vocabSize > (1 << 22) ||
      c.seqLen > (1 << 20))
    return bad("a value is implausibly large");
  return Status::ok();
}

Expected<uint64_t> checkpointSize(const ModelConfig& config) {
  auto counts = weightCounts(config);
  if (!counts) return counts.status();
  const WeightCounts& w = *counts;
  uint64_t floats = 0;
  for (uint64_t v : {w.embedding, w.rmsAtt, w.wq, w.wk, w.wv, w.wo, w.rmsFfn, w.w1, w.w2, w.w3,
                     w.rmsFinal, w.freqCis, w.classifier}) {
    if (!checkedAdd(floats, v)) return Status::invalidData("the header's sizes overflow 64-bit arithmetic");
  }
  uint64_t bytes = 0;
  if (!checkedProduct({floats, sizeof(float)}, bytes) || !checkedAdd(bytes, kHeaderBytes))
    return Status::invalidData("the header's sizes overflow 64-bit arithmetic");
  return bytes;
}

Expected<std::shared_ptr<const Checkpoint>> Checkpoint::load(const std::string& path) {
  auto fail = [&](Status s) { return s.withContext(path); };
  auto mapped = MappedFile::open(path);  // refuses FIFOs, devices and folders without blocking
  if (!mapped) return mapped.status();
  const uint64_t fileSize = (*mapped)->size();
  if (fileSize < kHeaderBytes) {
    return fail(Status::invalidData("expected a 28-byte llama2.c header, found a file of " +
                                    std::to_string(fileSize) + " bytes"));
  }
  const uint8_t* map = (*mapped)->bytes().data();

  std::shared_ptr<Checkpoint> cp(new Checkpoint());
  cp->path_ = path;
  cp->file_ = std::move(*mapped);

  int32_t header[7];
  std::memcpy(header, map, sizeof(header));
  ModelConfig& c = cp->config_;
  c.dim = header[0];
  c.hiddenDim = header[1];
  c.layers = header[2];
  c.heads = header[3];
  c.kvHeads = header[4];
  c.sharedClassifier = header[5] > 0;
  c.vocabSize = header[5] == INT32_MIN ? 0 : (header[5] < 0 ? -header[5] : header[5]);
  c.seqLen = header[6];
  KVS_RETURN_IF_ERROR(fail(validateConfig(c)));
  auto expected = checkpointSize(c);
  if (!expected) return fail(expected.status());
  if (*expected != fileSize) {
    return fail(Status::invalidData(
        "expected " + std::to_string(*expected) + " bytes for a float32 llama2.c checkpoint with " +
        describe(c) + ", found " + std::to_string(fileSize) + " bytes" +
        (*expected > fileSize ? " (truncated?)" : " (trailing data, or a different format such as a "
                                                  "quantized or v1/v2 export)")));
  }

  auto counts = weightCounts(c);
  if (!counts) return fail(counts.status());
  const WeightCounts& w = *counts;
  const float* p = reinterpret_cast<const float*>(map + kHeaderBytes);
  auto take = [&p](uint64_t n) {
    const float* at = p;
    p += n;
    return at;
  };
  cp->tokenEmbedding_ = take(w.embedding);
  const float* rmsAtt = take(w.rmsAtt);
  const float* wq = take(w.wq);
  const float* wk = take(w.wk);
  const float* wv = take(w.wv);
  const float* wo = take(w.wo);
  const float* rmsFfn = take(w.rmsFfn);
  const float* w1 = take(w.w1);
  const float* w2 = take(w.w2);
  const float* w3 = take(w.w3);
  cp->rmsFinal_ = take(w.rmsFinal);
  take(w.freqCis);  // run.c's precomputed RoPE tables: we compute RoPE ourselves
  cp->classifier_ = c.sharedClassifier ? cp->tokenEmbedding_ : take(w.classifier);

  const auto L = static_cast<uint64_t>(c.layers);
  cp->layers_.resize(static_cast<size_t>(c.layers));
  for (uint64_t l = 0; l < L; ++l) {
    LayerWeights& lw = cp->layers_[l];
    lw.rmsAtt = rmsAtt + l * (w.rmsAtt / L);
    lw.wq = wq + l * (w.wq / L);
    lw.wk = wk + l * (w.wk / L);
    lw.wv = wv + l * (w.wv / L);
    lw.wo = wo + l * (w.wo / L);
    lw.rmsFfn = rmsFfn + l * (w.rmsFfn / L);
    lw.w1 = w1 + l * (w.w1 / L);
    lw.w2 = w2 + l * (w.w2 / L);
    lw.w3 = w3 + l * (w.w3 / L);
  }
  return std::shared_ptr<const Checkpoint>(std::move(cp));
}

namespace {

/// One weight's pointer and row-major shape, by its GGUF-style name; false when there is none.
bool lookup(const Checkpoint& cp, std::string_view name, const float** data, std::vector<int64_t>* shape) {
  const ModelConfig& c = cp.config();
  const int64_t dim = c.dim, hid = c.hiddenDim, qd = int64_t{c.heads} * c.headDim(), kvd = c.kvDim(), vocab = c.vocabSize;
  auto set = [&](const float* p, std::vector<int64_t> s) {
    *data = p;
    *shape = std::move(s);
    return true;
  };
  if (name == "token_embd.weight") return set(cp.tokenEmbedding(), {vocab, dim});
  if (name == "output_norm.weight") return set(cp.rmsFinal(), {dim});
  if (name == "output.weight") return !c.sharedClassifier && set(cp.classifier(), {vocab, dim});
  constexpr std::string_view kBlk = "blk.";
  if (name.substr(0, kBlk.size()) != kBlk) return false;
  const std::string_view rest = name.substr(kBlk.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return false;
  int layer = 0;
  for (char ch : rest.substr(0, dot)) {
    if (ch < '0' || ch > '9') return false;
    layer = layer * 10 + (ch - '0');
  }
  if (layer >= c.layers || (dot > 1 && rest[0] == '0')) return false;
  const LayerWeights& w = cp.layer(layer);
  const std::string_view what = rest.substr(dot + 1);
  if (what == "attn_norm.weight") return set(w.rmsAtt, {dim});
  if (what == "attn_q.weight") return set(w.wq, {qd, dim});
  if (what == "attn_k.weight") return set(w.wk, {kvd, dim});
  if (what == "attn_v.weight") return set(w.wv, {kvd, dim});
  if (what == "attn_output.weight") return set(w.wo, {dim, qd});
  if (what == "ffn_norm.weight") return set(w.rmsFfn, {dim});
  if (what == "ffn_gate.weight") return set(w.w1, {hid, dim});
  if (what == "ffn_down.weight") return set(w.w2, {dim, hid});
  if (what == "ffn_up.weight") return set(w.w3, {hid, dim});
  return false;
}

}  // namespace

std::vector<std::string> Checkpoint::weightNames() const {
  std::vector<std::string> names = {"token_embd.weight"};
  for (int l = 0; l < config_.layers; ++l) {
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_down",
                          "ffn_up"})
      names.push_back("blk." + std::to_string(l) + "." + n + ".weight");
  }
  names.emplace_back("output_norm.weight");
  if (!config_.sharedClassifier) names.emplace_back("output.weight");
  return names;
}

bool Checkpoint::hasWeight(std::string_view name) const {
  const float* data = nullptr;
  std::vector<int64_t> shape;
  return lookup(*this, name, &data, &shape);
}

Expected<WeightTensor> Checkpoint::weight(std::string_view name) const {
  WeightTensor w;
  const float* data = nullptr;
  if (!lookup(*this, name, &data, &w.shape))
    return Status::invalidData(path_ + ": tensor '" + std::string(name) + "' is missing");
  w.name = std::string(name);
  w.type = GgmlType::F32;
  w.data = reinterpret_cast<const uint8_t*>(data);
  w.bytes = static_cast<uint64_t>(w.elements()) * sizeof(float);
  w.file = path_;
  return w;
}

Expected<std::vector<std::string>> loadTokenizer(const std::string& path, int vocabSize) {
  auto bad = [&](const std::string& what) {
    return Status::invalidData(path + ": not a llama2.c tokenizer for a vocabulary of " +
                               std::to_string(vocabSize) + " tokens: " + what);
  };
  auto mapped = MappedFile::open(path);  // a FIFO or device is refused, never waited on
  if (!mapped) return mapped.status();
  const std::span<const uint8_t> bytes = (*mapped)->bytes();
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
    return true;
  };
  int32_t maxLen = 0;
  if (!take(&maxLen, sizeof(maxLen))) return bad("no header");
  if (maxLen <= 0 || maxLen > (1 << 16)) return bad("max_token_length " + std::to_string(maxLen));
  std::vector<std::string> pieces;
  pieces.reserve(static_cast<size_t>(vocabSize));
  for (int i = 0; i < vocabSize; ++i) {
    float score = 0;
    int32_t len = 0;
    if (!take(&score, sizeof(score)) || !take(&len, sizeof(len)))
      return bad("ends after " + std::to_string(i) + " tokens");
    if (len < 0 || len > maxLen)
      return bad("token " + std::to_string(i) + " has length " + std::to_string(len) +
                 " (max_token_length " + std::to_string(maxLen) + ")");
    std::string piece(static_cast<size_t>(len), '\0');
    if (len > 0 && !take(piece.data(), static_cast<size_t>(len))) return bad("token " + std::to_string(i) + " is cut short");
    pieces.push_back(std::move(piece));
  }
  if (at != bytes.size())
    return bad("has data after " + std::to_string(vocabSize) + " tokens (a tokenizer for another model?)");
  return pieces;
}

}  // namespace kvscope
