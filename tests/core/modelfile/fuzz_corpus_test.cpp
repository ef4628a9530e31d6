// SPDX-License-Identifier: GPL-3.0-or-later
// The seed corpus of the gguf and safetensors fuzz targets (tests/fuzz/fuzz_entries.h), made by
// the tests' writers: valid files of every readable type, metadata type and alignment, and a few
// broken ones. Every seed must pass the fuzz properties here, in the normal build; with
// KVSCOPE_MODELFILE_CORPUS_OUT set, scripts/fuzz-seeds.sh has them written to
// $KVSCOPE_MODELFILE_CORPUS_OUT/{gguf,safetensors}/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/fuzz_entries.h"
#include "core/modelfile/gguf_writer.h"
#include "tests/support/safetensors_writer.h"

namespace kvscope {
namespace {

using Seeds = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

std::vector<float> wave(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::cos(static_cast<float>(i)) * 0.5f;
  return v;
}

Seeds ggufSeeds() {
  Seeds seeds;
  // Small on purpose: libFuzzer's mutations should reach the structure, not the data.
  GgufWriter meta(2);
  meta.set("general.architecture", "llama");
  meta.set("u8", uint8_t{1});
  meta.set("i8", int8_t{-1});
  meta.set("u16", uint16_t{2});
  meta.set("i16", int16_t{-2});
  meta.set("u32", uint32_t{3});
  meta.set("i32", int32_t{-3});
  meta.set("f32", 0.5f);
  meta.set("bool", true);
  meta.set("u64", uint64_t{4});
  meta.set("i64", int64_t{-4});
  meta.set("f64", 0.25);
  meta.setArray("tokenizer.ggml.tokens", std::vector<std::string>{"<s>", "\xE2\x96\x81" "a"});
  meta.setArray("tokenizer.ggml.scores", std::vector<float>{0.0f, -1.0f});
  meta.setArray("tokenizer.ggml.token_type", std::vector<int32_t>{3, 1});
  meta.setArray("ids", std::vector<uint64_t>{1, 2});
  seeds.emplace_back("metadata-v2.gguf", meta.bytes());
  for (const GgmlTypeInfo& t : ggmlTypes()) {
    if (t.dequantize == nullptr) continue;
    GgufWriter w;
    w.set("general.architecture", "llama");
    const int64_t cols = t.blockSize == 1 ? 8 : t.blockSize;
    if (t.quantize != nullptr) {
      w.addTensor("w", {2, cols}, t.type, wave(2 * cols));
    } else {
      w.addRandomTensor("w", {1, cols}, t.type, 5);
    }
    seeds.emplace_back(std::string("type-") + t.name + ".gguf", w.bytes());
  }
  GgufWriter aligned;
  aligned.setAlignment(8);
  aligned.addTensor("a", {3}, GgmlType::F16, wave(3));
  aligned.addTensor("b", {1, 32}, GgmlType::Q4_0, wave(32));
  seeds.emplace_back("alignment-8.gguf", aligned.bytes());
  GgufWriter unreadable;
  unreadable.addTensorBytes("iq2", {256}, static_cast<uint32_t>(GgmlType::Iq2Xxs), std::vector<uint8_t>(66, 0));
  seeds.emplace_back("unreadable-type.gguf", unreadable.bytes());
  auto truncated = aligned.bytes();
  truncated.resize(truncated.size() - 9);
  seeds.emplace_back("truncated.gguf", truncated);
  GgufWriter nested;
  nested.setRaw("nested", 9, {9, 0, 0, 0});
  seeds.emplace_back("array-of-arrays.gguf", nested.bytes());
  return seeds;
}

Seeds safetensorsSeeds() {
  Seeds seeds;
  test::SafetensorsWriter w;
  w.setMetadata("format", "pt");
  w.addTensor("a", {2, 3}, "F32", wave(6));
  w.addTensor("b", {4}, "BF16", wave(4));
  w.addTensor("c", {2}, "F16", wave(2));
  seeds.emplace_back("float-dtypes.safetensors", w.bytes());
  test::SafetensorsWriter other;
  other.addTensorBytes("ids", {2}, "I64", std::vector<uint8_t>(16, 1));
  other.addTensorBytes("fp4", {4}, "F4", std::vector<uint8_t>(2, 0x21));
  seeds.emplace_back("other-dtypes.safetensors", other.bytes());
  test::SafetensorsWriter empty;
  seeds.emplace_back("empty.safetensors", empty.bytes());
  auto cut = w.bytes();
  cut.resize(cut.size() - 3);
  seeds.emplace_back("truncated.safetensors", cut);
  return seeds;
}

void writeSeeds(const Seeds& seeds, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

TEST(ModelfileCorpus, GgufSeedsPassTheFuzzProperties) {
  const Seeds seeds = ggufSeeds();
  int accepted = 0;
  for (const auto& [name, bytes] : seeds) {
    EXPECT_EQ(fuzz::fuzzGguf(bytes.data(), bytes.size()), "") << name;
    fuzz::MemoryFile m(bytes.data(), bytes.size());
    if (GgufFile::open(m.path())) ++accepted;
  }
  EXPECT_EQ(accepted, static_cast<int>(seeds.size()) - 2) << "all but the truncated and nested seeds open";
  if (const char* out = std::getenv("KVSCOPE_MODELFILE_CORPUS_OUT")) writeSeeds(seeds, std::filesystem::path(out) / "gguf");
}

TEST(ModelfileCorpus, SafetensorsSeedsPassTheFuzzProperties) {
  const Seeds seeds = safetensorsSeeds();
  int accepted = 0;
  for (const auto& [name, bytes] : seeds) {
    EXPECT_EQ(fuzz::fuzzSafetensors(bytes.data(), bytes.size()), "") << name;
    fuzz::MemoryFile m(bytes.data(), bytes.size());
    if (SafetensorsFile::open(m.path())) ++accepted;
  }
  EXPECT_EQ(accepted, static_cast<int>(seeds.size()) - 1) << "all but the truncated seed open";
  if (const char* out = std::getenv("KVSCOPE_MODELFILE_CORPUS_OUT"))
    writeSeeds(seeds, std::filesystem::path(out) / "safetensors");
}

TEST(ModelfileCorpus, PropertiesCatchALyingReader) {
  // The property is not vacuous: a refusal that forgets the file is reported.
  EXPECT_NE(fuzz::checkFailure(Status::invalidData("key 'x' is missing"), "getter", "/dev/shm/f"), "");
  EXPECT_NE(fuzz::checkFailure(Status::internal("oops"), "getter", ""), "");
}

}  // namespace
}  // namespace kvscope
