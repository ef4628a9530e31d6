// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF files and Hugging Face folders of each architecture, written here with random weights,
// against the plain float64 forward of tests/support/tiny_models.h: keys, values, queries and
// logits to 1e-4 relative; the RoPE conventions (GGUF llama rotates adjacent pairs, every other
// file half split) pinned by permuting weights; stories260K converted to both formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/io/dump.h"
#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "core/modelfile/gguf.h"
#include "core/quant/rope.h"
#include "core/tokenize/tokenizer.h"
#include "core/modelfile/gguf_writer.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"
#include "tests/support/tiny_models.h"

namespace kvscope {
namespace {

using test::ReferenceOutput;
using test::TinyModelSpec;
using test::TinyWeights;

/// What one forward pass of kvscope computes, per layer position-major, and the logits.
struct Computed {
  std::vector<std::vector<float>> q, kPre, k, v;
  std::vector<float> logits;  ///< [T, vocab]
};

Computed compute(const std::shared_ptr<const Model>& m, const std::vector<int>& tokens) {
  Computed c;
  const int L = m->hparams().layers;
  c.q.resize(static_cast<size_t>(L));
  c.kPre.resize(static_cast<size_t>(L));
  c.k.resize(static_cast<size_t>(L));
  c.v.resize(static_cast<size_t>(L));
  const int T = static_cast<int>(tokens.size()), q = m->hparams().qDim(), kv = m->hparams().kvDim();
  Forward forward(m);
  Stream s;
  Status st = forward.run(s, tokens, [&](const LayerTensors& t) {
    const auto l = static_cast<size_t>(t.layer);
    c.q[l].assign(t.query, t.query + static_cast<size_t>(T) * q);
    c.kPre[l].assign(t.keyPreRope, t.keyPreRope + static_cast<size_t>(T) * kv);
    c.k[l].assign(t.key, t.key + static_cast<size_t>(T) * kv);
    c.v[l].assign(t.value, t.value + static_cast<size_t>(T) * kv);
    return Status::ok();
  });
  EXPECT_TRUE(st.isOk()) << st.message();
  st = allLogits(forward, s, c.logits);
  EXPECT_TRUE(st.isOk()) << st.message();
  return c;
}

/// |a − b| ≤ rel · max(1, max |b|) over a whole set of rows.
void expectClose(const std::vector<float>& got, const std::vector<std::vector<double>>& want, const std::string& what,
                 const std::vector<int>* permutation = nullptr, double rel = 1e-4) {
  double scale = 1.0;
  for (const auto& row : want)
    for (double x : row) scale = std::max(scale, std::abs(x));
  const size_t width = want.empty() ? 0 : want[0].size();
  ASSERT_EQ(got.size(), want.size() * width) << what;
  double worst = 0;
  for (size_t p = 0; p < want.size(); ++p)
    for (size_t i = 0; i < width; ++i) {
      const size_t j = permutation != nullptr ? static_cast<size_t>((*permutation)[i]) : i;
      worst = std::max(worst, std::abs(static_cast<double>(got[p * width + i]) - want[p][j]));
    }
  EXPECT_LT(worst, rel * scale) << what << ": worst difference " << worst << " at scale " << scale;
}

void expectMatchesReference(const Computed& c, const ReferenceOutput& ref, const std::string& what,
                            const std::vector<int>* qPerm = nullptr, const std::vector<int>* kPerm = nullptr,
                            double rel = 1e-4) {
  for (size_t l = 0; l < ref.key.size(); ++l) {
    const std::string at = what + " layer " + std::to_string(l);
    expectClose(c.q[l], ref.query[l], at + " query", qPerm, rel);
    expectClose(c.kPre[l], ref.keyPreRope[l], at + " key_pre_rope", kPerm, rel);
    expectClose(c.k[l], ref.key[l], at + " key", kPerm, rel);
    expectClose(c.v[l], ref.value[l], at + " value", nullptr, rel);
  }
  expectClose(c.logits, ref.logits, what + " logits", nullptr, rel);
}

/// The tolerance against the reference for a GGUF model whose F16/BF16 weights make kvscope
/// round activations as llama.cpp does. The reference rounds its float64 activations to the same
/// type; kvscope rounds float32 ones, so an activation within float32 noise of a rounding midpoint
/// may round the other way (one ulp, 2u relative) and that flip travels on to the logits. Measured:
/// at most 2.1e-4 (f16) and 1.3e-3 (bf16) of the logits' scale on these models; the bound is one
/// unit roundoff u of the type on top of 1e-4, far below what a wrong RoPE, norm or bias gives (O(1)).
double roundingTolerance(const TinyModelSpec& s) {
  double u = 0;
  for (GgmlType t : {s.matrixType, s.embeddingType}) {
    if (t == GgmlType::F16) u = std::max(u, std::ldexp(1.0, -11));
    if (t == GgmlType::Bf16) u = std::max(u, std::ldexp(1.0, -8));
  }
  return 1e-4 + u;
}

std::vector<int> someTokens(int vocab, int n, uint64_t seed) {
  std::vector<int> t = {1};
  uint64_t x = seed;
  while (static_cast<int>(t.size()) < n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t.push_back(3 + static_cast<int>((x >> 33) % static_cast<uint64_t>(vocab - 3)));
  }
  return t;
}

/// Channel c of HF's half-split head holds GGUF channel perm[c]: HF (h, j, i) ← GGUF (h, i, j).
std::vector<int> hfFromGguf(int heads, int d) {
  std::vector<int> p(static_cast<size_t>(heads * d));
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < d / 2; ++i) p[static_cast<size_t>(h * d + j * (d / 2) + i)] = h * d + 2 * i + j;
  return p;
}

struct Case {
  std::string label;
  TinyModelSpec spec;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  TinyModelSpec llama;  // dim 64, 4 heads of 16, 2 kv heads
  out.push_back({"llama f32", llama});
  TinyModelSpec tied = llama;
  tied.tied = true;
  tied.embeddingType = GgmlType::F16;
  tied.matrixType = GgmlType::F16;
  out.push_back({"llama f16 tied", tied});
  TinyModelSpec scaled = llama;
  scaled.ropeScaling = "llama3";
  scaled.theta = 500000.0;
  scaled.matrixType = GgmlType::Bf16;
  out.push_back({"llama bf16 llama3 rope", scaled});
  TinyModelSpec linear = llama;
  linear.ropeScaling = "linear";
  linear.scalingFactor = 2.0;
  linear.bias = true;
  out.push_back({"llama linear rope with biases", linear});
  TinyModelSpec qwen2 = llama;
  qwen2.arch = "qwen2";
  qwen2.theta = 1000000.0;
  qwen2.matrixType = GgmlType::F16;
  out.push_back({"qwen2 f16", qwen2});
  TinyModelSpec qwen3 = llama;
  qwen3.arch = "qwen3";
  qwen3.dim = 48;
  qwen3.heads = 4;
  qwen3.kvHeads = 2;
  qwen3.headDim = 32;  // key_length 32 ≠ 48 / 4
  qwen3.matrixType = GgmlType::Bf16;
  out.push_back({"qwen3 bf16 key_length", qwen3});
  return out;
}

TEST(RealModels, GgufFilesOfEachArchitectureMatchTheFloat64Reference) {
  test::TempDir dir;
  for (const Case& c : cases()) {
    const std::string path = dir.file(c.label + ".gguf");
    const TinyWeights w = test::writeTinyGguf(c.spec, path);
    auto m = Model::load(path);
    ASSERT_TRUE(m) << c.label << ": " << m.status().message();
    EXPECT_EQ((*m)->format(), ModelFormat::Gguf);
    EXPECT_EQ((*m)->architecture().name, c.spec.arch);
    const ModelHparams& hp = (*m)->hparams();
    EXPECT_EQ(hp.rope.style, c.spec.arch == "llama" ? RopeStyle::Interleaved : RopeStyle::Half) << c.label;
    EXPECT_EQ(hp.tiedEmbeddings, c.spec.tied) << c.label;
    EXPECT_EQ(hp.qkNorm, c.spec.arch == "qwen3") << c.label;
    EXPECT_EQ(hp.qkvBias, c.spec.bias || c.spec.arch == "qwen2") << c.label;
    const std::vector<double> freq = test::referenceInvFreq(c.spec);
    ASSERT_EQ(hp.rope.invFreq.size(), freq.size());
    for (size_t i = 0; i < freq.size(); ++i) EXPECT_NEAR(hp.rope.invFreq[i], freq[i], 1e-6 * freq[i]) << c.label << " pair " << i;
    const std::vector<int> tokens = someTokens(c.spec.vocab, 24, 7);
    const Computed got = compute(*m, tokens);
    expectMatchesReference(got, test::referenceForward(c.spec, w, tokens, c.spec.arch == "llama", true), c.label,
                           nullptr, nullptr, roundingTolerance(c.spec));
  }
}

TEST(RealModels, HuggingFaceFoldersComputeTheSameFunctionWithHalfSplitRope) {
  test::TempDir dir;
  for (const Case& c : cases()) {
    const TinyWeights w = test::writeTinyGguf(c.spec, dir.file(c.label + ".gguf"));
    // HF folders in F32 so that the values are the GGUF ones exactly; one of them sharded.
    const std::string folder = dir.file(c.label + "-hf");
    test::writeTinyHf(c.spec, w, folder, "F32", c.spec.arch == "qwen2" ? 3 : 1);
    auto m = Model::load(folder);
    ASSERT_TRUE(m) << c.label << ": " << m.status().message();
    EXPECT_EQ((*m)->format(), ModelFormat::HfFolder);
    EXPECT_EQ((*m)->hparams().rope.style, RopeStyle::Half) << "every Hugging Face checkpoint rotates half split";
    const std::vector<int> tokens = someTokens(c.spec.vocab, 20, 3);
    const Computed got = compute(*m, tokens);
    const ReferenceOutput ref = test::referenceForward(c.spec, w, tokens, c.spec.arch == "llama");
    if (c.spec.arch == "llama") {
      // HF's q/k rows are GGUF's permuted (llama.cpp's converter undoes it): the logits and the
      // values are the same, the keys and queries the same up to that channel permutation.
      const int D = c.spec.headDim > 0 ? c.spec.headDim : c.spec.dim / c.spec.heads;
      const std::vector<int> qp = hfFromGguf(c.spec.heads, D), kp = hfFromGguf(c.spec.kvHeads, D);
      expectMatchesReference(got, ref, c.label + " (HF)", &qp, &kp);
    } else {
      expectMatchesReference(got, ref, c.label + " (HF)");
    }
  }
}

TEST(RealModels, QuantizedWeightsAreDequantizedExactlyAndComparedWithTheReference) {
  // kvscope multiplies the dequantized weights in float32 (llama.cpp quantizes the activations
  // too, so its logits differ by design: docs/real-models.md): every type the format table reads.
  test::TempDir dir;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Iq4Nl, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K, GgmlType::Iq4Xs}) {
    TinyModelSpec s;
    s.dim = 256;  // K-quant rows hold whole 256-value blocks
    s.ffn = 256;
    s.heads = 4;
    s.kvHeads = 2;
    s.layers = 1;
    s.matrixType = type;
    s.embeddingType = type;
    const std::string label = ggmlTypeInfo(type).name;
    const std::string path = dir.file(label + ".gguf");
    const TinyWeights w = test::writeTinyGguf(s, path);
    auto m = Model::load(path);
    ASSERT_TRUE(m) << label << ": " << m.status().message();
    EXPECT_EQ((*m)->info(TensorRole::AttnQ, 0).type, label);
    const std::vector<int> tokens = someTokens(s.vocab, 12, 5);
    expectMatchesReference(compute(*m, tokens), test::referenceForward(s, w, tokens, true, true), label);
  }
}

/// The weights of stories260K by GGUF name (read through kvscope's llama2.c loader).
TinyWeights storiesWeights(const Model& m) {
  TinyWeights w;
  auto put = [&](const std::string& name, TensorRole role, int layer) {
    std::vector<float> v;
    EXPECT_TRUE(m.whole(role, layer, v).isOk());
    w.tensors[name] = std::vector<double>(v.begin(), v.end());
  };
  put("token_embd.weight", TensorRole::TokenEmbedding, 0);
  put("output_norm.weight", TensorRole::OutputNorm, 0);
  for (int l = 0; l < 5; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    put(b + "attn_norm.weight", TensorRole::AttnNorm, l);
    put(b + "attn_q.weight", TensorRole::AttnQ, l);
    put(b + "attn_k.weight", TensorRole::AttnK, l);
    put(b + "attn_v.weight", TensorRole::AttnV, l);
    put(b + "attn_output.weight", TensorRole::AttnOutput, l);
    put(b + "ffn_norm.weight", TensorRole::FfnNorm, l);
    put(b + "ffn_gate.weight", TensorRole::FfnGate, l);
    put(b + "ffn_up.weight", TensorRole::FfnUp, l);
    put(b + "ffn_down.weight", TensorRole::FfnDown, l);
  }
  return w;
}

/// stories260K's shape as a TinyModelSpec (for the writers).
TinyModelSpec storiesSpec() {
  TinyModelSpec s;
  s.dim = 64;
  s.ffn = 172;
  s.layers = 5;
  s.heads = 8;
  s.kvHeads = 4;
  s.vocab = 512;
  s.context = 512;
  s.rmsEps = 1e-5;
  s.tied = true;
  return s;
}

/// Writes `w` as a llama GGUF (unpermuted, as convert-llama2c-to-ggml writes llama2.c).
void writeStoriesGguf(const TinyWeights& w, const std::string& path) {
  const TinyModelSpec s = storiesSpec();
  GgufWriter g;
  g.set("general.architecture", "llama");
  g.set("general.name", "stories260K");
  g.set("llama.context_length", uint32_t{512});
  g.set("llama.embedding_length", uint32_t{64});
  g.set("llama.block_count", uint32_t{5});
  g.set("llama.feed_forward_length", uint32_t{172});
  g.set("llama.attention.head_count", uint32_t{8});
  g.set("llama.attention.head_count_kv", uint32_t{4});
  g.set("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.set("llama.rope.freq_base", 10000.0f);
  g.set("llama.rope.dimension_count", uint32_t{8});
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    const std::vector<double>& v = w.at(name);
    std::vector<float> f(v.begin(), v.end());
    g.addTensor(name, shape, GgmlType::F32, f);
  };
  add("token_embd.weight", {512, 64});
  for (int l = 0; l < 5; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {64});
    add(b + "attn_q.weight", {64, 64});
    add(b + "attn_k.weight", {32, 64});
    add(b + "attn_v.weight", {32, 64});
    add(b + "attn_output.weight", {64, 64});
    add(b + "ffn_norm.weight", {64});
    add(b + "ffn_gate.weight", {172, 64});
    add(b + "ffn_up.weight", {172, 64});
    add(b + "ffn_down.weight", {64, 172});
  }
  add("output_norm.weight", {64});
  ASSERT_TRUE(g.write(path));
  (void)s;
}

TEST(RealModels, Stories260KAsGgufAndAsAHuggingFaceFolderGivesTheLlama2cLogits) {
  if (test::storiesModel().empty()) GTEST_SKIP() << "../shared/models/stories260K.bin is absent";
  test::TempDir dir;
  auto llama2c = Model::load(test::storiesModel().string());
  ASSERT_TRUE(llama2c);
  const TinyWeights w = storiesWeights(**llama2c);
  const std::string gguf = dir.file("stories.gguf"), hf = dir.file("stories-hf");
  writeStoriesGguf(w, gguf);
  test::writeTinyHf(storiesSpec(), w, hf, "F32", 2);
  auto fromGguf = Model::load(gguf);
  ASSERT_TRUE(fromGguf) << fromGguf.status().message();
  auto fromHf = Model::load(hf);
  ASSERT_TRUE(fromHf) << fromHf.status().message();
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 266, 9, 34, 100, 300, 511, 0, 44, 45};
  const Computed a = compute(*llama2c, tokens), b = compute(*fromGguf, tokens), c = compute(*fromHf, tokens);
  // The same file content and the same convention (adjacent pairs): the same bits.
  EXPECT_EQ(a.logits, b.logits);
  for (size_t l = 0; l < 5; ++l) EXPECT_EQ(a.k[l], b.k[l]) << l;
  // The HF folder: the permuted rows rotate half split, the same function.
  double worst = 0;
  for (size_t i = 0; i < a.logits.size(); ++i) worst = std::max(worst, std::abs(double(a.logits[i]) - c.logits[i]));
  EXPECT_LT(worst, 1e-4);
  const std::vector<int> kp = hfFromGguf(4, 8);
  for (size_t l = 0; l < 5; ++l)
    for (size_t p = 0; p < tokens.size(); ++p)
      for (int i = 0; i < 32; ++i)
        ASSERT_NEAR(c.k[l][p * 32 + static_cast<size_t>(i)], a.k[l][p * 32 + static_cast<size_t>(kp[static_cast<size_t>(i)])],
                    1e-5)
            << "layer " << l << " position " << p << " channel " << i;
}

TEST(RealModels, RecordFromAGgufFileUsesItsTokenizerAndRope) {
  test::TempDir dir;
  TinyModelSpec s;
  s.ropeScaling = "llama3";
  const std::string path = dir.file("tiny.gguf"), out = dir.file("tiny.h5");
  test::writeTinyGguf(s, path);
  auto m = Model::load(path);
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_NE((*m)->tokenizer(), nullptr);
  // The tiny vocabulary holds "▁a" … "▁z" (286-311): "a b" with SentencePiece's space prefix is
  // "▁a▁b", two tokens, BOS first (llama.cpp's add_bos for `llama` vocabularies).
  RecordInput in;
  in.text = "a b";
  auto ids = recordInputTokens(**m, in);
  ASSERT_TRUE(ids) << ids.status().message();
  EXPECT_EQ(*ids, (std::vector<int>{1, 286, 287}));
  RecordOptions o;
  o.tokens = *ids;
  auto r = recordDump(*m, o, out);
  ASSERT_TRUE(r) << r.status().message();
  auto d = Dump::open(out);
  ASSERT_TRUE(d) << d.status().message();
  const DumpInfo& info = (*d)->info();
  EXPECT_EQ(info.ropeStyle, RopeStyle::Interleaved);
  ASSERT_EQ(info.ropeInvFreq.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(info.ropeInvFreq[i], (*m)->hparams().rope.invFreq[i]);
  EXPECT_EQ(*(*d)->tokenText(), (std::vector<std::string>{"<s>", " a", " b"}));
  // A prerope spec re-applies this model's scaled RoPE: key_pre_rope rotated is the key, bit for bit.
  Tensor3 pre = *(*d)->read(1, TensorKind::KeyPreRope);
  applyRope(pre, info.rope());
  EXPECT_EQ(pre.data, (*d)->read(1, TensorKind::Key)->data);
}

/// A GGUF of `s` with `edit` applied to its writer before writing.
std::string edited(const test::TempDir& dir, const std::string& name, const TinyModelSpec& s,
                   const std::function<void(GgufWriter&)>& edit) {
  // Written twice: once to get the tensors, then re-emitted through a writer the test can edit.
  const std::string plain = dir.file(name + ".plain.gguf");
  test::writeTinyGguf(s, plain);
  auto f = GgufFile::open(plain);
  EXPECT_TRUE(f);
  GgufWriter g;
  for (const GgufEntry& e : (*f)->entries()) {
    const GgufValue& v = e.value;
    if (v.isArray() && v.elementType() == GgufType::String) {
      g.setArray(e.key, std::vector<std::string>(v.strings().begin(), v.strings().end()));
    } else if (v.isArray() && v.elementType() == GgufType::F32) {
      std::vector<float> x;
      for (uint64_t i = 0; i < v.size(); ++i) x.push_back(static_cast<float>(*v.numberAt(i)));
      g.setArray(e.key, x);
    } else if (v.isArray()) {
      std::vector<int32_t> x;
      for (uint64_t i = 0; i < v.size(); ++i) x.push_back(static_cast<int32_t>(*v.integerAt(i)));
      g.setArray(e.key, x);
    } else if (v.type() == GgufType::String) {
      g.set(e.key, v.stringAt(0));
    } else if (v.type() == GgufType::F32) {
      g.set(e.key, static_cast<float>(*v.numberAt(0)));
    } else {
      g.set(e.key, static_cast<uint32_t>(*v.integerAt(0)));
    }
  }
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    const WeightTensor w = (*f)->weight(t);
    g.addTensorBytes(t.name, t.dims, static_cast<uint32_t>(t.type), std::vector<uint8_t>(w.data, w.data + w.bytes));
  }
  edit(g);
  const std::string path = dir.file(name + ".gguf");
  EXPECT_TRUE(g.write(path));
  return path;
}

TEST(RealModels, FilesKvscopeCannotRunAreRefusedByName) {
  test::TempDir dir;
  const TinyModelSpec s;
  auto refusal = [&](const std::string& name, const std::function<void(GgufWriter&)>& edit) {
    auto m = Model::load(edited(dir, name, s, edit));
    EXPECT_FALSE(m) << name;
    return m ? std::string() : m.status().message();
  };
  std::string msg = refusal("gemma", [](GgufWriter& g) { g.set("general.architecture", "gemma2"); });
  EXPECT_NE(msg.find("architecture 'gemma2' is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("soft-caps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << "the message lists what kvscope runs: " << msg;
  msg = refusal("unknown", [](GgufWriter& g) { g.set("general.architecture", "mamba"); });
  EXPECT_NE(msg.find("'mamba'"), std::string::npos) << msg;
  msg = refusal("yarn", [](GgufWriter& g) { g.set("llama.rope.scaling.type", "yarn"); });
  EXPECT_NE(msg.find("'yarn' is not supported"), std::string::npos) << msg;
  msg = refusal("partial", [](GgufWriter& g) { g.set("llama.rope.dimension_count", uint32_t{8}); });
  EXPECT_NE(msg.find("partial RoPE"), std::string::npos) << msg;
  msg = refusal("vlen", [](GgufWriter& g) { g.set("llama.attention.value_length", uint32_t{8}); });
  EXPECT_NE(msg.find("value head dim 8"), std::string::npos) << msg;
  msg = refusal("heads", [](GgufWriter& g) { g.set("llama.attention.head_count_kv", uint32_t{3}); });
  EXPECT_NE(msg.find("does not divide"), std::string::npos) << msg;
  msg = refusal("noeps", [](GgufWriter& g) { g.erase("llama.attention.layer_norm_rms_epsilon"); });
  EXPECT_NE(msg.find("layer_norm_rms_epsilon"), std::string::npos) << msg;
  // A tensor whose shape disagrees with the hyperparameters is named with both shapes.
  msg = refusal("ffn", [](GgufWriter& g) { g.set("llama.feed_forward_length", uint32_t{95}); });
  EXPECT_NE(msg.find("tensor 'blk.0.ffn_gate.weight' has shape [96, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs [95, 64]"), std::string::npos) << msg;
  // A missing layer tensor.
  msg = refusal("blocks", [](GgufWriter& g) { g.set("llama.block_count", uint32_t{3}); });
  EXPECT_NE(msg.find("'blk.2.attn_norm.weight' is missing"), std::string::npos) << msg;
  // A non-finite weight is refused when its layer is read, naming the layer.
  TinyModelSpec inf = s;
  const std::string path = dir.file("inf.gguf");
  TinyWeights w = test::writeTinyGguf(inf, path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    auto gg = GgufFile::open(path);
    ASSERT_TRUE(gg);
    const GgufTensorInfo* t = (*gg)->findTensor("blk.1.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    const float bad = std::numeric_limits<float>::infinity();
    f.seekp(static_cast<std::streamoff>(t->fileOffset + 40));
    f.write(reinterpret_cast<const char*>(&bad), 4);
  }
  auto m = Model::load(path);
  ASSERT_TRUE(m);
  Forward forward(*m);
  Stream st;
  const int tokens[3] = {1, 5, 6};
  const Status r = forward.run(st, tokens);
  EXPECT_NE(r.message().find("layer 1: ffn_gate/up holds a non-finite weight"), std::string::npos) << r.message();
  // A lone .safetensors file and a llama2.c tokenizer with a GGUF are refused with the reason.
  test::SafetensorsWriter one;
  one.addTensor("x", {2}, "F32", std::vector<float>{1, 2});
  ASSERT_TRUE(one.write(dir.file("lone.safetensors")));
  auto lone = Model::load(dir.file("lone.safetensors"));
  ASSERT_FALSE(lone);
  EXPECT_NE(lone.status().message().find("no config.json"), std::string::npos) << lone.status().message();
  auto tok = Model::load(path, dir.file("tokenizer.bin"));
  ASSERT_FALSE(tok);
  EXPECT_NE(tok.status().message().find("goes with a llama2.c checkpoint"), std::string::npos);
}

TEST(RealModels, HuggingFaceConfigsKvscopeCannotRunAreRefusedByName) {
  test::TempDir dir;
  TinyModelSpec s;
  const TinyWeights w = test::writeTinyGguf(s, dir.file("base.gguf"));
  auto withConfig = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const std::string folder = dir.file(name);
    test::writeTinyHf(s, w, folder);
    std::ifstream in(folder + "/config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    edit(c);
    std::ofstream(folder + "/config.json") << c.dump(2);
    auto m = Model::load(folder);
    return m ? std::string() : m.status().message();
  };
  std::string msg = withConfig("gemma", [](nlohmann::json& c) {
    c["architectures"] = {"Gemma2ForCausalLM"};
    c["model_type"] = "gemma2";
  });
  EXPECT_NE(msg.find("'Gemma2ForCausalLM' is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LlamaForCausalLM"), std::string::npos) << msg;
  msg = withConfig("dyn", [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; });
  EXPECT_NE(msg.find("rope_scaling type 'dynamic'"), std::string::npos) << msg;
  msg = withConfig("vocab", [](nlohmann::json& c) { c["vocab_size"] = 301; });
  EXPECT_NE(msg.find("vocab_size is 301"), std::string::npos) << msg;
  msg = withConfig("nolm", [](nlohmann::json& c) { c["tie_word_embeddings"] = false; });
  EXPECT_TRUE(msg.empty()) << "lm_head.weight is there: " << msg;
  // A sliding window is honoured by refusing sequences longer than it.
  const std::string folder = dir.file("mistral");
  test::writeTinyHf(s, w, folder);
  {
    std::ifstream in(folder + "/config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = 8;
    std::ofstream(folder + "/config.json") << c.dump(2);
  }
  auto m = Model::load(folder);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ((*m)->hparams().slidingWindow, 8);
  Forward f(*m);
  Stream st;
  const std::vector<int> nine(9, 5);
  EXPECT_NE(f.run(st, nine).message().find("sliding attention window 8"), std::string::npos);
}

TEST(CliModelInfo, DescribesAGgufFile) {
  test::TempDir dir;
  TinyModelSpec s;
  s.arch = "qwen2";
  s.matrixType = GgmlType::Q8_0;
  const std::string path = dir.file("q.gguf");
  test::writeTinyGguf(s, path);
  auto r = test::runCli("model-info '" + path + "' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "gguf");
  EXPECT_EQ(j["architecture"], "qwen2");
  EXPECT_EQ(j["head_dim"], 16);
  EXPECT_EQ(j["rope"]["style"], "half");
  EXPECT_EQ(j["qkv_bias"], true);
  // 2 tensors × 2 layers × 2 kv heads × 16 × 2 bytes.
  EXPECT_EQ(j["kv_bytes_per_token_fp16"], 256);
  EXPECT_EQ(j["weight_types"]["q8_0"]["tensors"], 2 * 7 + 1);
  EXPECT_TRUE(j["tokenizer"]["description"].get<std::string>().find("300") != std::string::npos) << j["tokenizer"];
  auto text = test::runCli("model-info '" + path + "'");
  ASSERT_EQ(text.exitCode, 0);
  EXPECT_NE(text.out.find("architecture qwen2"), std::string::npos) << text.out;
  auto bad = test::runCli("model-info '" + dir.file("missing.gguf") + "'");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("missing.gguf"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvscope
