// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/model_workloads.h"

#include <malloc.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/bench/measure.h"
#include "core/io/dump.h"
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "core/modelfile/gguf_writer.h"
#include "core/quant/plan.h"
#include "core/util/small_float.h"

namespace kvscope::bench {

double ModelShape::layerGemmFlopsPerToken() const {
  const double q = static_cast<double>(heads) * headDim, kv = static_cast<double>(kvHeads) * headDim;
  // q, k, v and the output projection, then gate, up and down: 2 flops per multiply-add.
  return 2.0 * layers * (dim * (q + 2 * kv) + q * dim + 3.0 * dim * ffn);
}

int64_t ModelShape::layerFloatBytes() const {
  const int64_t q = int64_t{heads} * headDim, kv = int64_t{kvHeads} * headDim;
  return 4 * (int64_t{dim} * (q + 2 * kv) + q * dim + 3 * int64_t{dim} * ffn + 2 * int64_t{dim} + q + 2 * kv);
}

namespace {

/// Random weights of `type` for a [rows, cols] matrix with values of about 1/sqrt(cols): F16
/// values, or Q8_0 blocks whose scale makes the codes that size (random codes are valid blocks).
std::vector<uint8_t> weights(GgmlType type, int64_t rows, int64_t cols, std::mt19937_64& gen) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(cols));
  std::vector<uint8_t> out;
  if (type == GgmlType::F16) {
    out.resize(static_cast<size_t>(rows * cols) * 2);
    std::uniform_real_distribution<float> u(static_cast<float>(-1.7 * scale), static_cast<float>(1.7 * scale));
    for (size_t i = 0; i < out.size(); i += 2) {
      const uint16_t h = fp::fp16Bits(u(gen));
      out[i] = static_cast<uint8_t>(h & 0xff);
      out[i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return out;
  }
  // Q8_0: 34 bytes per 32 values, an fp16 scale then 32 int8 codes.
  const int64_t blocks = rows * cols / 32;
  out.resize(static_cast<size_t>(blocks) * 34);
  const uint16_t d = fp::fp16Bits(static_cast<float>(1.7 * scale / 127.0));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = out.data() + b * 34;
    block[0] = static_cast<uint8_t>(d & 0xff);
    block[1] = static_cast<uint8_t>(d >> 8);
    for (int i = 0; i < 32; i += 8) {
      const uint64_t bits = gen();
      std::memcpy(block + 2 + i, &bits, 8);
    }
  }
  return out;
}

Status writeModel(const ModelShape& s, GgmlType type, const std::string& path) {
  GgufWriter g;
  g.set("general.architecture", "qwen2");
  g.set("general.name", "bench-qwen2.5-0.5b-shape");
  g.set("qwen2.context_length", uint32_t{32768});
  g.set("qwen2.embedding_length", static_cast<uint32_t>(s.dim));
  g.set("qwen2.block_count", static_cast<uint32_t>(s.layers));
  g.set("qwen2.feed_forward_length", static_cast<uint32_t>(s.ffn));
  g.set("qwen2.attention.head_count", static_cast<uint32_t>(s.heads));
  g.set("qwen2.attention.head_count_kv", static_cast<uint32_t>(s.kvHeads));
  g.set("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
  g.set("qwen2.rope.freq_base", 1000000.0f);
  // A SentencePiece vocabulary of the model's size: llama.cpp needs one to load the file.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  char piece[16];
  for (int i = 0; i < 256; ++i) {
    std::snprintf(piece, sizeof piece, "<0x%02X>", i);
    tokens.emplace_back(piece);
  }
  while (static_cast<int>(tokens.size()) < s.vocab) tokens.push_back("\xE2\x96\x81t" + std::to_string(tokens.size()));
  std::vector<float> scores(tokens.size());
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t i = 0; i < tokens.size(); ++i) scores[i] = -static_cast<float>(i);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int i = 3; i < 259; ++i) types[static_cast<size_t>(i)] = 6;
  g.set("tokenizer.ggml.model", "llama");
  g.setArray("tokenizer.ggml.tokens", tokens);
  g.setArray("tokenizer.ggml.scores", scores);
  g.setArray("tokenizer.ggml.token_type", types);
  std::mt19937_64 gen(2048);
  const int64_t q = int64_t{s.heads} * s.headDim, kv = int64_t{s.kvHeads} * s.headDim;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    g.addTensorBytes(name, {cols, rows}, static_cast<uint32_t>(type), weights(type, rows, cols, gen));
  };
  auto vector = [&](const std::string& name, int64_t n, float offset, float spread) {
    std::uniform_real_distribution<float> u(offset - spread, offset + spread);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(gen);
    g.addTensor(name, {n}, GgmlType::F32, v);
  };
  matrix("token_embd.weight", s.vocab, s.dim);  // tied: Qwen2.5-0.5B has no output.weight
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    vector(b + "attn_norm.weight", s.dim, 1.0f, 0.1f);
    matrix(b + "attn_q.weight", q, s.dim);
    matrix(b + "attn_k.weight", kv, s.dim);
    matrix(b + "attn_v.weight", kv, s.dim);
    vector(b + "attn_q.bias", q, 0.0f, 0.1f);
    vector(b + "attn_k.bias", kv, 0.0f, 0.1f);
    vector(b + "attn_v.bias", kv, 0.0f, 0.1f);
    matrix(b + "attn_output.weight", s.dim, q);
    vector(b + "ffn_norm.weight", s.dim, 1.0f, 0.1f);
    matrix(b + "ffn_gate.weight", s.ffn, s.dim);
    matrix(b + "ffn_up.weight", s.ffn, s.dim);
    matrix(b + "ffn_down.weight", s.dim, s.ffn);
  }
  vector("output_norm.weight", s.dim, 1.0f, 0.1f);
  if (!g.write(path)) return Status::ioError(path + ": cannot write the benchmark model");
  return Status::ok();
}

double wallSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<ModelFigures> benchModel(const ModelShape& shape, GgmlType weightType, int tokens, const std::string& tempDir,
                                  const std::string& llamaCppDir, const Progress& progress) {
  ModelFigures f;
  f.shape = shape;
  f.weights = weightType;
  f.tokens = tokens;
  const std::string stem = (std::filesystem::path(tempDir) / ("kvscope-bench-model-" + std::to_string(::getpid()) + "-" +
                                                               ggmlTypeInfo(weightType).name))
                               .string();
  const std::string gguf = stem + ".gguf", dump = stem + ".h5";
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(a, ec);
      std::filesystem::remove(b, ec);
    }
  } cleanup{gguf, dump};
  auto t0 = std::chrono::steady_clock::now();
  if (!report(progress, 0, "writing the benchmark model")) return Status::cancelled();
  KVS_RETURN_IF_ERROR(writeModel(shape, weightType, gguf));
  f.generateSeconds = wallSince(t0);
  std::error_code ec;
  f.fileBytes = static_cast<int64_t>(std::filesystem::file_size(gguf, ec));

  std::mt19937_64 gen(7);
  RecordOptions o;
  o.tokens.push_back(1);
  while (static_cast<int>(o.tokens.size()) < tokens)
    o.tokens.push_back(259 + static_cast<int>(gen() % static_cast<uint64_t>(shape.vocab - 259)));
  ::malloc_trim(0);  // heap the earlier groups left, so the peak counts the record's own memory
  resetPeakRss();
  const double cpu0 = processCpuSeconds();
  t0 = std::chrono::steady_clock::now();
  {
    auto model = Model::load(gguf);
    if (!model) return model.status();
    auto r = recordDump(*model, o, dump, progress);
    if (!r) return r.status();
  }
  f.recordSeconds = wallSince(t0);
  f.recordCpuSeconds = processCpuSeconds() - cpu0;
  f.recordPeakRssBytes = peakRssBytes();

  t0 = std::chrono::steady_clock::now();
  {
    auto model = Model::load(gguf);
    if (!model) return model.status();
    auto d = Dump::open(dump);
    if (!d) return d.status();
    E2eSetting s;
    s.key = *parsePlan("q4_0");
    s.value = *parsePlan("q4_0");
    auto r = runE2e(*model, **d, {s}, {}, progress);
    if (!r) return r.status();
  }
  f.e2eSeconds = wallSince(t0);

  if (llamaCppDir.empty()) {
    f.llamaCppNote = "not run (give --llamacpp tests/conformance with node-llama-cpp installed)";
    return f;
  }
  // llama.cpp's own prompt processing of the same tokens (tests/conformance/bench_llama.mjs).
  std::string ids;
  for (int t : o.tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const std::string idsFile = stem + ".tokens";
  std::ofstream(idsFile) << ids;
  const std::string cmd = "cd '" + llamaCppDir + "' && node bench_llama.mjs '" + gguf + "' '" + idsFile + "' 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = ::pclose(p);
    std::filesystem::remove(idsFile, ec);
    const auto brace = out.rfind('{');
    if (rc == 0 && brace != std::string::npos) {
      try {
        f.llamaCppSeconds = nlohmann::json::parse(out.substr(brace)).at("seconds").get<double>();
      } catch (const std::exception&) {
        f.llamaCppNote = "llama.cpp's output did not parse: " + out;
      }
    } else {
      f.llamaCppNote = "llama.cpp did not run: " + out;
    }
  }
  return f;
}

}  // namespace kvscope::bench
