// SPDX-License-Identifier: GPL-3.0-or-later
#include "tests/support/tiny_models.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

#include "core/modelfile/gguf_writer.h"
#include "tests/support/safetensors_writer.h"

namespace kvscope::test {
namespace {

bool canEncode(GgmlType t) {
  const GgmlTypeInfo& info = ggmlTypeInfo(t);
  return info.quantize != nullptr || t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::Bf16;
}

/// The values a tensor of `type` holds after writing `values`: encoded and decoded again.
std::vector<double> stored(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ggmlTypeInfo(type).dequantize(bytes.data(), out.data(), n);
  return {out.begin(), out.end()};
}

struct Writer {
  GgufWriter& gguf;
  TinyWeights& weights;
  std::mt19937_64 gen;

  void add(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, double scale, double offset) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<uint8_t> bytes;
    if (canEncode(type)) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = static_cast<float>(offset + scale * normal(gen));
      bytes = encodeGgml(type, v);
    } else {
      // The K-quants have no encoder in kvscope: random bytes are valid blocks.
      bytes = randomGgmlBlocks(type, n, gen());
    }
    weights.tensors[name] = stored(type, bytes, n);
    gguf.addTensorBytes(name, ggmlDims(shape), static_cast<uint32_t>(type), std::move(bytes));
  }
};

int headDimOf(const TinyModelSpec& s) { return s.headDim > 0 ? s.headDim : s.dim / s.heads; }

/// Llama 3's factor for pair i (what llama.cpp's converter writes as rope_freqs.weight): the
/// divisor of the pair's frequency.
double llama3Divisor(const TinyModelSpec& s, double freq) {
  const double lowWavelen = s.originalContext / s.lowFreqFactor, highWavelen = s.originalContext / s.highFreqFactor;
  const double wavelen = 2 * M_PI / freq;
  if (wavelen < highWavelen) return 1.0;
  if (wavelen > lowWavelen) return s.scalingFactor;
  const double smooth = (s.originalContext / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
  return 1.0 / ((1 - smooth) / s.scalingFactor + smooth);
}

}  // namespace

std::vector<std::string> tinyVocabulary(int vocab) {
  std::vector<std::string> t = {"<unk>", "<s>", "</s>"};
  char buf[8];
  for (int i = 0; i < 256; ++i) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", i);
    t.push_back(buf);
  }
  // "▁", the letters, "▁a" … "▁z": a text of one-letter words segments into whole tokens.
  t.push_back("\xE2\x96\x81");
  for (char c = 'a'; c <= 'z'; ++c) t.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) t.push_back("\xE2\x96\x81" + std::string(1, c));
  while (static_cast<int>(t.size()) < vocab) t.push_back("\xE2\x96\x81t" + std::to_string(t.size()));
  t.resize(static_cast<size_t>(vocab));
  return t;
}

std::vector<double> referenceInvFreq(const TinyModelSpec& s) {
  const int D = headDimOf(s);
  std::vector<double> f(static_cast<size_t>(D / 2));
  for (int i = 0; i < D / 2; ++i) {
    double freq = 1.0 / std::pow(s.theta, 2.0 * i / D);
    if (s.ropeScaling == "linear") freq /= s.scalingFactor;
    if (s.ropeScaling == "llama3") freq /= llama3Divisor(s, freq);
    f[static_cast<size_t>(i)] = freq;
  }
  return f;
}

TinyWeights writeTinyGguf(const TinyModelSpec& s, const std::string& path) {
  const std::string a = s.arch;
  const int D = headDimOf(s), q = s.heads * D, kv = s.kvHeads * D;
  GgufWriter g;
  TinyWeights w;
  g.set("general.architecture", a);
  g.set("general.name", "tiny-" + a);
  g.set(a + ".context_length", static_cast<uint32_t>(s.context));
  g.set(a + ".embedding_length", static_cast<uint32_t>(s.dim));
  g.set(a + ".block_count", static_cast<uint32_t>(s.layers));
  g.set(a + ".feed_forward_length", static_cast<uint32_t>(s.ffn));
  g.set(a + ".attention.head_count", static_cast<uint32_t>(s.heads));
  g.set(a + ".attention.head_count_kv", static_cast<uint32_t>(s.kvHeads));
  g.set(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(s.rmsEps));
  g.set(a + ".rope.freq_base", static_cast<float>(s.theta));
  g.set(a + ".rope.dimension_count", static_cast<uint32_t>(D));
  if (s.headDim > 0) {
    g.set(a + ".attention.key_length", static_cast<uint32_t>(D));
    g.set(a + ".attention.value_length", static_cast<uint32_t>(D));
  }
  if (s.ropeScaling == "linear") {
    g.set(a + ".rope.scaling.type", "linear");
    g.set(a + ".rope.scaling.factor", static_cast<float>(s.scalingFactor));
  }
  const std::vector<std::string> vocab = tinyVocabulary(s.vocab);
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < s.vocab; ++i) {
    scores.push_back(-static_cast<float>(i));
    types.push_back(i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);
  }
  g.set("tokenizer.ggml.model", "llama");
  g.setArray("tokenizer.ggml.tokens", vocab);
  g.setArray("tokenizer.ggml.scores", scores);
  g.setArray("tokenizer.ggml.token_type", types);
  g.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(1));
  g.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(2));
  g.set("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(0));

  Writer wr{g, w, std::mt19937_64(s.seed)};
  const double m = 1.0 / std::sqrt(static_cast<double>(s.dim));
  wr.add("token_embd.weight", {s.vocab, s.dim}, s.embeddingType, 1.0, 0.0);
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    wr.add(b + "attn_norm.weight", {s.dim}, GgmlType::F32, 0.1, 1.0);
    wr.add(b + "attn_q.weight", {q, s.dim}, s.matrixType, m, 0.0);
    wr.add(b + "attn_k.weight", {kv, s.dim}, s.matrixType, m, 0.0);
    wr.add(b + "attn_v.weight", {kv, s.dim}, s.matrixType, m, 0.0);
    if (s.bias || a == "qwen2") {
      wr.add(b + "attn_q.bias", {q}, GgmlType::F32, 0.2, 0.0);
      wr.add(b + "attn_k.bias", {kv}, GgmlType::F32, 0.2, 0.0);
      wr.add(b + "attn_v.bias", {kv}, GgmlType::F32, 0.2, 0.0);
    }
    if (a == "qwen3") {
      wr.add(b + "attn_q_norm.weight", {D}, GgmlType::F32, 0.1, 1.0);
      wr.add(b + "attn_k_norm.weight", {D}, GgmlType::F32, 0.1, 1.0);
    }
    wr.add(b + "attn_output.weight", {s.dim, q}, s.matrixType, 1.0 / std::sqrt(static_cast<double>(q)), 0.0);
    wr.add(b + "ffn_norm.weight", {s.dim}, GgmlType::F32, 0.1, 1.0);
    wr.add(b + "ffn_gate.weight", {s.ffn, s.dim}, s.matrixType, m, 0.0);
    wr.add(b + "ffn_up.weight", {s.ffn, s.dim}, s.matrixType, m, 0.0);
    wr.add(b + "ffn_down.weight", {s.dim, s.ffn}, s.matrixType, 1.0 / std::sqrt(static_cast<double>(s.ffn)), 0.0);
  }
  wr.add("output_norm.weight", {s.dim}, GgmlType::F32, 0.1, 1.0);
  if (!s.tied) wr.add("output.weight", {s.vocab, s.dim}, s.matrixType, m, 0.0);
  if (s.ropeScaling == "llama3") {
    // llama.cpp's converter writes Llama 3's scaling as divisors of each pair's frequency.
    std::vector<float> factors;
    for (int i = 0; i < D / 2; ++i) {
      const double freq = 1.0 / std::pow(s.theta, 2.0 * i / D);
      factors.push_back(static_cast<float>(llama3Divisor(s, freq)));
      w.ropeFactors.push_back(factors.back());
    }
    g.addTensor("rope_freqs.weight", {D / 2}, GgmlType::F32, factors);
  }
  if (!g.write(path)) throw std::runtime_error("cannot write " + path);
  return w;
}

void writeTinyHf(const TinyModelSpec& s, const TinyWeights& w, const std::string& folder, const std::string& dtype,
                 int shards) {
  const int D = headDimOf(s), q = s.heads * D, kv = s.kvHeads * D;
  nlohmann::json c;
  const std::map<std::string, std::string> arch = {
      {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
  c["architectures"] = {arch.at(s.arch)};
  c["model_type"] = s.arch;
  c["hidden_size"] = s.dim;
  c["intermediate_size"] = s.ffn;
  c["num_hidden_layers"] = s.layers;
  c["num_attention_heads"] = s.heads;
  c["num_key_value_heads"] = s.kvHeads;
  if (s.headDim > 0) c["head_dim"] = D;
  c["rms_norm_eps"] = s.rmsEps;
  c["rope_theta"] = s.theta;
  c["max_position_embeddings"] = s.context;
  c["vocab_size"] = s.vocab;
  c["tie_word_embeddings"] = s.tied;
  c["torch_dtype"] = dtype == "F32" ? "float32" : dtype == "F16" ? "float16" : "bfloat16";
  if (s.arch == "llama") c["attention_bias"] = s.bias;
  if (s.ropeScaling == "linear") c["rope_scaling"] = {{"type", "linear"}, {"factor", s.scalingFactor}};
  if (s.ropeScaling == "llama3")
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.scalingFactor},
                         {"low_freq_factor", s.lowFreqFactor},
                         {"high_freq_factor", s.highFreqFactor},
                         {"original_max_position_embeddings", s.originalContext}};
  HfFolderWriter hf(c.dump(2));
  auto put = [&](const std::string& hfName, const std::string& ggufName, const std::vector<int64_t>& shape,
                 bool permuteHeads, int heads) {
    std::vector<double> v = w.at(ggufName);
    if (permuteHeads && s.arch == "llama") {
      // HF row (h, j, i) holds GGUF row (h, i, j): GGUF pairs (2i, 2i+1) become HF's (i, i + D/2).
      const int64_t cols = shape.size() == 2 ? shape[1] : 1;
      std::vector<double> out(v.size());
      for (int h = 0; h < heads; ++h)
        for (int j = 0; j < 2; ++j)
          for (int i = 0; i < D / 2; ++i)
            for (int64_t col = 0; col < cols; ++col)
              out[static_cast<size_t>(((h * D) + j * (D / 2) + i) * cols + col)] =
                  v[static_cast<size_t>(((h * D) + 2 * i + j) * cols + col)];
      v = std::move(out);
    }
    std::vector<float> f(v.begin(), v.end());
    hf.addTensor(hfName, shape, dtype, f);
  };
  put("model.embed_tokens.weight", "token_embd.weight", {s.vocab, s.dim}, false, 0);
  for (int l = 0; l < s.layers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    put(h + "input_layernorm.weight", b + "attn_norm.weight", {s.dim}, false, 0);
    put(h + "self_attn.q_proj.weight", b + "attn_q.weight", {q, s.dim}, true, s.heads);
    put(h + "self_attn.k_proj.weight", b + "attn_k.weight", {kv, s.dim}, true, s.kvHeads);
    put(h + "self_attn.v_proj.weight", b + "attn_v.weight", {kv, s.dim}, false, 0);
    if (w.tensors.count(b + "attn_q.bias") != 0) {
      put(h + "self_attn.q_proj.bias", b + "attn_q.bias", {q}, true, s.heads);
      put(h + "self_attn.k_proj.bias", b + "attn_k.bias", {kv}, true, s.kvHeads);
      put(h + "self_attn.v_proj.bias", b + "attn_v.bias", {kv}, false, 0);
    }
    if (s.arch == "qwen3") {
      put(h + "self_attn.q_norm.weight", b + "attn_q_norm.weight", {D}, false, 0);
      put(h + "self_attn.k_norm.weight", b + "attn_k_norm.weight", {D}, false, 0);
    }
    put(h + "self_attn.o_proj.weight", b + "attn_output.weight", {s.dim, q}, false, 0);
    put(h + "post_attention_layernorm.weight", b + "ffn_norm.weight", {s.dim}, false, 0);
    put(h + "mlp.gate_proj.weight", b + "ffn_gate.weight", {s.ffn, s.dim}, false, 0);
    put(h + "mlp.up_proj.weight", b + "ffn_up.weight", {s.ffn, s.dim}, false, 0);
    put(h + "mlp.down_proj.weight", b + "ffn_down.weight", {s.dim, s.ffn}, false, 0);
  }
  put("model.norm.weight", "output_norm.weight", {s.dim}, false, 0);
  if (!s.tied) put("lm_head.weight", "output.weight", {s.vocab, s.dim}, false, 0);
  if (!hf.write(folder, shards)) throw std::runtime_error("cannot write " + folder);
}

/// x rounded to nearest-even onto a float type of `bits` significant bits and smallest normal
/// exponent `emin` (f16: 11, −14; bf16: 8, −126), written plainly with frexp-style arithmetic.
double roundTo(double x, int bits, int emin) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::max(std::ilogb(x), emin);
  const double step = std::ldexp(1.0, e - (bits - 1));
  return std::nearbyint(x / step) * step;
}

ReferenceOutput referenceForward(const TinyModelSpec& s, const TinyWeights& w, const std::vector<int>& tokens,
                                 bool interleaved, bool llamaCpp) {
  const int T = static_cast<int>(tokens.size()), dim = s.dim, D = headDimOf(s), H = s.heads, KVH = s.kvHeads;
  const int q = H * D, kv = KVH * D, group = H / KVH;
  const std::vector<double> freq = referenceInvFreq(s);
  // The activations of a product with F16 / BF16 weights, as llama.cpp's CPU backend takes them.
  auto activations = [&](const std::vector<double>& x, GgmlType type) {
    if (!llamaCpp || (type != GgmlType::F16 && type != GgmlType::Bf16)) return x;
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      r[i] = type == GgmlType::F16 ? roundTo(static_cast<float>(x[i]), 11, -14) : roundTo(static_cast<float>(x[i]), 8, -126);
    return r;
  };
  auto matVec = [&](const std::vector<double>& m, const std::vector<double>& xIn, int rows,
                    GgmlType type = GgmlType::F32) {
    const std::vector<double> x = activations(xIn, type);
    const size_t cols = x.size();
    std::vector<double> y(static_cast<size_t>(rows), 0.0);
    for (int r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) y[static_cast<size_t>(r)] += m[static_cast<size_t>(r) * cols + c] * x[c];
    return y;
  };
  auto rms = [&](const std::vector<double>& x, const std::vector<double>& weight) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + s.rmsEps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = weight[i] * x[i] * inv;
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int pos) {
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < D / 2; ++i) {
        const int a = h * D + (interleaved ? 2 * i : i), b = h * D + (interleaved ? 2 * i + 1 : i + D / 2);
        const double angle = pos * freq[static_cast<size_t>(i)], c = std::cos(angle), sn = std::sin(angle);
        const double x0 = v[static_cast<size_t>(a)], x1 = v[static_cast<size_t>(b)];
        v[static_cast<size_t>(a)] = x0 * c - x1 * sn;
        v[static_cast<size_t>(b)] = x0 * sn + x1 * c;
      }
  };
  ReferenceOutput out;
  std::vector<std::vector<double>> x(static_cast<size_t>(T));
  const std::vector<double>& emb = w.at("token_embd.weight");
  for (int p = 0; p < T; ++p)
    x[static_cast<size_t>(p)].assign(emb.begin() + static_cast<ptrdiff_t>(tokens[static_cast<size_t>(p)]) * dim,
                                     emb.begin() + static_cast<ptrdiff_t>(tokens[static_cast<size_t>(p)] + 1) * dim);
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool bias = w.tensors.count(b + "attn_q.bias") != 0;
    std::vector<std::vector<double>> Q(static_cast<size_t>(T)), K(static_cast<size_t>(T)), Kp(static_cast<size_t>(T)),
        V(static_cast<size_t>(T));
    for (int p = 0; p < T; ++p) {
      const std::vector<double> xn = rms(x[static_cast<size_t>(p)], w.at(b + "attn_norm.weight"));
      std::vector<double> qv = matVec(w.at(b + "attn_q.weight"), xn, q, s.matrixType),
                          kv_ = matVec(w.at(b + "attn_k.weight"), xn, kv, s.matrixType),
                          vv = matVec(w.at(b + "attn_v.weight"), xn, kv, s.matrixType);
      if (bias) {
        for (int i = 0; i < q; ++i) qv[static_cast<size_t>(i)] += w.at(b + "attn_q.bias")[static_cast<size_t>(i)];
        for (int i = 0; i < kv; ++i) {
          kv_[static_cast<size_t>(i)] += w.at(b + "attn_k.bias")[static_cast<size_t>(i)];
          vv[static_cast<size_t>(i)] += w.at(b + "attn_v.bias")[static_cast<size_t>(i)];
        }
      }
      if (s.arch == "qwen3") {
        auto headNorm = [&](std::vector<double>& v, int heads, const std::vector<double>& weight) {
          for (int h = 0; h < heads; ++h) {
            std::vector<double> one(v.begin() + h * D, v.begin() + (h + 1) * D);
            one = rms(one, weight);
            std::copy(one.begin(), one.end(), v.begin() + h * D);
          }
        };
        headNorm(qv, H, w.at(b + "attn_q_norm.weight"));
        headNorm(kv_, KVH, w.at(b + "attn_k_norm.weight"));
      }
      Kp[static_cast<size_t>(p)] = kv_;
      rope(qv, H, p);
      rope(kv_, KVH, p);
      Q[static_cast<size_t>(p)] = qv;
      K[static_cast<size_t>(p)] = kv_;
      V[static_cast<size_t>(p)] = vv;
    }
    out.query.push_back(Q);
    out.keyPreRope.push_back(Kp);
    out.key.push_back(K);
    out.value.push_back(V);
    for (int p = 0; p < T; ++p) {
      std::vector<double> attn(static_cast<size_t>(q), 0.0);
      for (int h = 0; h < H; ++h) {
        const int g = h / group;
        std::vector<double> sc(static_cast<size_t>(p + 1));
        double mx = -1e300;
        for (int j = 0; j <= p; ++j) {
          double dot = 0;
          for (int i = 0; i < D; ++i)
            dot += Q[static_cast<size_t>(p)][static_cast<size_t>(h * D + i)] * K[static_cast<size_t>(j)][static_cast<size_t>(g * D + i)];
          sc[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (double& v : sc) sum += (v = std::exp(v - mx));
        for (int j = 0; j <= p; ++j)
          for (int i = 0; i < D; ++i)
            attn[static_cast<size_t>(h * D + i)] +=
                sc[static_cast<size_t>(j)] / sum * V[static_cast<size_t>(j)][static_cast<size_t>(g * D + i)];
      }
      const std::vector<double> o = matVec(w.at(b + "attn_output.weight"), attn, dim, s.matrixType);
      for (int i = 0; i < dim; ++i) x[static_cast<size_t>(p)][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      const std::vector<double> xn = rms(x[static_cast<size_t>(p)], w.at(b + "ffn_norm.weight"));
      const std::vector<double> gate = matVec(w.at(b + "ffn_gate.weight"), xn, s.ffn, s.matrixType),
                                up = matVec(w.at(b + "ffn_up.weight"), xn, s.ffn, s.matrixType);
      std::vector<double> act(static_cast<size_t>(s.ffn));
      for (int i = 0; i < s.ffn; ++i) {
        const double a = gate[static_cast<size_t>(i)];
        act[static_cast<size_t>(i)] = a / (1.0 + std::exp(-a)) * up[static_cast<size_t>(i)];
      }
      const std::vector<double> d = matVec(w.at(b + "ffn_down.weight"), act, dim, s.matrixType);
      for (int i = 0; i < dim; ++i) x[static_cast<size_t>(p)][static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
  }
  const std::vector<double>& cls = s.tied ? w.at("token_embd.weight") : w.at("output.weight");
  for (int p = 0; p < T; ++p)
    out.logits.push_back(matVec(cls, rms(x[static_cast<size_t>(p)], w.at("output_norm.weight")), s.vocab,
                                s.tied ? s.embeddingType : s.matrixType));
  return out;
}

}  // namespace kvscope::test
