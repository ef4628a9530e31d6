// SPDX-License-Identifier: GPL-3.0-or-later
// Checkpoints generated in the test: a tiny model with random weights, and broken variants of it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <random>

#include "core/model/checkpoint.h"
#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/model/model.h"
#include "tests/core/model/reference_model.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

// dim 8, hidden 12, 2 layers, 4 heads of 2 kv heads (D = 2), vocab 11, seq_len 6.
constexpr int32_t kHeader[7] = {8, 12, 2, 4, 2, 11, 6};

// Floats a checkpoint with this header holds, counted by hand from run.c's layout.
int64_t floatCount(const int32_t h[7]) {
  const int64_t dim = h[0], hid = h[1], L = h[2], H = h[3], KVH = h[4], V = std::abs(h[5]), S = h[6];
  const int64_t D = dim / H;
  int64_t n = V * dim + L * dim + L * dim * dim + 2 * L * dim * KVH * D + L * dim * dim + L * dim +
              3 * L * dim * hid + dim + S * D;
  if (h[5] < 0) n += V * dim;
  return n;
}

std::string writeCheckpoint(const test::TempDir& dir, const std::string& name, const int32_t h[7],
                            int64_t floatDelta = 0, int64_t byteDelta = 0) {
  const std::string path = dir.file(name);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(h), 7 * sizeof(int32_t));
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 0.5f);
  const int64_t n = floatCount(h) + floatDelta;
  for (int64_t i = 0; i < n; ++i) {
    float v = normal(gen);
    out.write(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  for (int64_t i = 0; i < byteDelta; ++i) out.put('x');
  return path;
}

TEST(Checkpoint, SizeFormulaMatchesHandCount) {
  ModelConfig c{8, 12, 2, 4, 2, 11, 6, true};
  auto size = checkpointSize(c);
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 28 + 4 * static_cast<uint64_t>(floatCount(kHeader)));
  c.sharedClassifier = false;
  EXPECT_EQ(*checkpointSize(c), 28 + 4 * static_cast<uint64_t>(floatCount(kHeader) + 11 * 8));
}

TEST(Checkpoint, LoadsAGeneratedModel) {
  test::TempDir dir;
  auto cp = Checkpoint::load(writeCheckpoint(dir, "tiny.bin", kHeader));
  ASSERT_TRUE(cp) << cp.status().message();
  EXPECT_EQ((*cp)->config().kvDim(), 4);
  EXPECT_TRUE((*cp)->config().sharedClassifier);
}

TEST(Checkpoint, WeightViewUsesGgufNamesAndShapes) {
  // llama.cpp's convert-llama2c-to-ggml names; row-major [out, in] shapes from run.c's layout.
  test::TempDir dir;
  auto cp = Checkpoint::load(writeCheckpoint(dir, "tiny.bin", kHeader));
  ASSERT_TRUE(cp) << cp.status().message();
  const Checkpoint& c = **cp;
  const auto names = c.weightNames();
  EXPECT_EQ(names.size(), 1u + 2 * 9 + 1);  // no output.weight: the classifier is shared
  EXPECT_FALSE(c.hasWeight("output.weight"));
  EXPECT_FALSE(c.hasWeight("blk.2.attn_q.weight"));
  EXPECT_FALSE(c.hasWeight("blk.01.attn_q.weight"));
  struct Case {
    const char* name;
    const float* data;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {{"token_embd.weight", c.tokenEmbedding(), {11, 8}},
                        {"blk.1.attn_q.weight", c.layer(1).wq, {8, 8}},
                        {"blk.1.attn_k.weight", c.layer(1).wk, {4, 8}},
                        {"blk.0.attn_output.weight", c.layer(0).wo, {8, 8}},
                        {"blk.0.ffn_gate.weight", c.layer(0).w1, {12, 8}},
                        {"blk.0.ffn_down.weight", c.layer(0).w2, {8, 12}},
                        {"blk.1.ffn_up.weight", c.layer(1).w3, {12, 8}},
                        {"blk.1.ffn_norm.weight", c.layer(1).rmsFfn, {8}},
                        {"output_norm.weight", c.rmsFinal(), {8}}};
  for (const Case& k : cases) {
    auto w = c.weight(k.name);
    ASSERT_TRUE(w) << k.name;
    EXPECT_EQ(reinterpret_cast<const float*>(w->data), k.data) << k.name;
    EXPECT_EQ(w->shape, k.shape) << k.name;
    EXPECT_EQ(w->type, GgmlType::F32);
  }
  auto embedding = c.weight("token_embd.weight");
  std::vector<float> row(8);
  ASSERT_TRUE(dequantizeRows(*embedding, 3, 1, row.data()).isOk());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(row[static_cast<size_t>(i)], c.tokenEmbedding()[3 * 8 + i]);
  EXPECT_NE(c.weight("nope").status().message().find("tensor 'nope' is missing"), std::string::npos);
}

TEST(Checkpoint, SeparateClassifierMatchesFloat64Reference) {
  test::TempDir dir;
  int32_t h[7];
  std::copy(kHeader, kHeader + 7, h);
  h[5] = -11;  // negative vocab_size: wcls follows the RoPE tables
  const std::string path = writeCheckpoint(dir, "wcls.bin", h);
  auto cp = Checkpoint::load(path);
  ASSERT_TRUE(cp) << cp.status().message();
  EXPECT_FALSE((*cp)->config().sharedClassifier);
  EXPECT_NE((*cp)->classifier(), (*cp)->tokenEmbedding());
  EXPECT_EQ(reinterpret_cast<const float*>((*cp)->weight("output.weight")->data), (*cp)->classifier());
  test::ReferenceModel ref;
  ASSERT_TRUE(ref.load(path));
  auto model = Model::load(path);
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_FALSE((*model)->hparams().tiedEmbeddings);
  Forward forward(*model);
  Stream stream;
  const std::vector<int> tokens = {1, 4, 10, 0, 7, 3};
  ASSERT_TRUE(forward.run(stream, tokens).isOk());
  std::vector<float> logits;
  ASSERT_TRUE(allLogits(forward, stream, logits).isOk());
  for (int pos = 0; pos < 6; ++pos) {
    std::vector<double> expected = ref.step(tokens[static_cast<size_t>(pos)]);
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(logits[static_cast<size_t>(pos) * 11 + i], expected[i], 1e-4) << pos;
  }
  const int one[1] = {1};
  EXPECT_FALSE(forward.run(stream, one).isOk()) << "position 6 is beyond seq_len 6";
}

TEST(Checkpoint, TruncatedFileNamesExpectedAndFoundSizes) {
  test::TempDir dir;
  const std::string path = writeCheckpoint(dir, "short.bin", kHeader, -3);
  auto cp = Checkpoint::load(path);
  ASSERT_FALSE(cp);
  const std::string m = cp.status().message();
  EXPECT_EQ(cp.status().code(), StatusCode::InvalidData);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  const uint64_t expected = 28 + 4 * static_cast<uint64_t>(floatCount(kHeader));
  EXPECT_NE(m.find("expected " + std::to_string(expected) + " bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("found " + std::to_string(expected - 12) + " bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
}

TEST(Checkpoint, TrailingBytesAreRejected) {
  test::TempDir dir;
  auto cp = Checkpoint::load(writeCheckpoint(dir, "long.bin", kHeader, 0, 2));
  ASSERT_FALSE(cp);
  EXPECT_NE(cp.status().message().find("trailing data"), std::string::npos) << cp.status().message();
}

TEST(Checkpoint, BadHeadersSayWhatIsWrong) {
  test::TempDir dir;
  struct Case {
    int32_t h[7];
    const char* phrase;
  };
  const Case cases[] = {
      {{8, 12, 2, 3, 1, 11, 6}, "dim is not a multiple of n_heads"},
      {{8, 12, 2, 4, 3, 11, 6}, "n_heads is not a multiple of n_kv_heads"},
      {{8, 12, 0, 4, 2, 11, 6}, "must be positive"},
      {{8, 12, 2, 8, 2, 11, 6}, "must be even"},
      {{8, 12, 2, 4, 2, 11, -6}, "must be positive"},
      {{1 << 30, 1 << 30, 1000, 1, 1, 11, 6}, "implausibly large"},
  };
  int i = 0;
  for (const Case& c : cases) {
    // Write just the header and a little data: the header check must come first.
    const std::string path = dir.file("bad" + std::to_string(i++) + ".bin");
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(c.h), sizeof(c.h)).write("abcd", 4);
    auto cp = Checkpoint::load(path);
    ASSERT_FALSE(cp) << c.phrase;
    EXPECT_EQ(cp.status().code(), StatusCode::InvalidData);
    EXPECT_NE(cp.status().message().find(c.phrase), std::string::npos) << cp.status().message();
    EXPECT_NE(cp.status().message().find(path), std::string::npos) << cp.status().message();
  }
}

TEST(Checkpoint, TinyAndMissingFiles) {
  test::TempDir dir;
  const std::string path = dir.file("tiny.bin");
  std::ofstream(path, std::ios::binary).write("0123456789", 10);
  auto cp = Checkpoint::load(path);
  ASSERT_FALSE(cp);
  EXPECT_NE(cp.status().message().find("28-byte"), std::string::npos) << cp.status().message();
  auto missing = Checkpoint::load(dir.file("nope.bin"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::IoError);
  EXPECT_NE(missing.status().message().find("nope.bin"), std::string::npos);
  EXPECT_EQ(Checkpoint::load(dir.path().string()).status().code(), StatusCode::InvalidData) << "a folder";
}

TEST(Checkpoint, FifoIsRefusedWithoutWaitingForAWriter) {
  // Issue 28, bad input: the loader checks the file kind before any read (MappedFile opens with
  // O_NONBLOCK), so a FIFO with no writer is refused at once. The tokenizer reads the same way.
  test::TempDir dir;
  const std::string fifo = dir.file("pipe.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto done = std::async(std::launch::async, [&] {
    return std::make_pair(Checkpoint::load(fifo).status(), loadTokenizer(fifo, 3).status());
  });
  if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    for (int i = 0; i < 2; ++i) {  // unblock the waiting open so that the test can end
      const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (w >= 0) ::close(w);
    }
    done.wait();
    FAIL() << "a FIFO blocked the llama2.c loader";
  }
  const auto [model, tokenizer] = done.get();
  EXPECT_NE(model.message().find(fifo + ": not a regular file (a FIFO)"), std::string::npos) << model.message();
  EXPECT_NE(tokenizer.message().find(fifo + ": not a regular file (a FIFO)"), std::string::npos) << tokenizer.message();
}

TEST(Tokenizer, ParsesPiecesAndRejectsBrokenFiles) {
  test::TempDir dir;
  auto write = [&](const std::string& name, int tokens, bool extra) {
    std::ofstream out(dir.file(name), std::ios::binary);
    int32_t maxLen = 5;
    out.write(reinterpret_cast<const char*>(&maxLen), 4);
    for (int i = 0; i < tokens; ++i) {
      float score = static_cast<float>(-i);
      std::string piece = i == 0 ? "<unk>" : (i == 1 ? "\n<s>\n" : " t" + std::to_string(i));
      int32_t len = static_cast<int32_t>(piece.size());
      out.write(reinterpret_cast<const char*>(&score), 4).write(reinterpret_cast<const char*>(&len), 4);
      out.write(piece.data(), len);
    }
    if (extra) out.put('!');
    return dir.file(name);
  };
  auto ok = loadTokenizer(write("tok.bin", 3, false), 3);
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"<unk>", "\n<s>\n", " t2"}));
  auto shortFile = loadTokenizer(write("short.bin", 2, false), 3);
  ASSERT_FALSE(shortFile);
  EXPECT_NE(shortFile.status().message().find("ends after 2 tokens"), std::string::npos);
  EXPECT_FALSE(loadTokenizer(write("long.bin", 3, true), 3));
}

}  // namespace
}  // namespace kvscope
