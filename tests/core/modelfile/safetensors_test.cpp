// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors files and Hugging Face folders written by the tests' writers, valid and hostile.
// The validity rules are the safetensors library's (safetensors/src/tensor.rs, Metadata::validate).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/modelfile/model_format.h"
#include "core/modelfile/safetensors.h"
#include "core/util/small_float.h"
#include "core/modelfile/gguf_writer.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using test::HfFolderWriter;
using test::SafetensorsWriter;

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.125f - 3.0f;
  return v;
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A file with the given header text (padded to 8 with spaces) and data bytes.
std::vector<uint8_t> withHeader(std::string header, size_t dataBytes) {
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::vector<uint8_t> out(8 + header.size() + dataBytes, 0);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

class Safetensors : public ::testing::Test {
 protected:
  std::string write(const std::vector<uint8_t>& b, const std::string& name = "model.safetensors") {
    const std::string path = dir_.file(name);
    writeBytes(path, b);
    return path;
  }
  void expectRefused(const std::vector<uint8_t>& b, const std::vector<std::string>& phrases) {
    const std::string path = write(b, "bad.safetensors");
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f) << "accepted; expected: " << phrases.front();
    EXPECT_EQ(f.status().code(), StatusCode::InvalidData);
    const std::string m = f.status().message();
    EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;
    for (const std::string& p : phrases) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
  test::TempDir dir_;
};

TEST_F(Safetensors, FloatDtypesReadBack) {
  SafetensorsWriter w;
  w.setMetadata("format", "pt");
  const auto a = ramp(6), b = ramp(8), c = ramp(5);
  w.addTensor("model.embed_tokens.weight", {2, 3}, "F32", a);
  w.addTensor("model.layers.0.self_attn.q_proj.weight", {2, 4}, "BF16", b);
  w.addTensor("model.norm.weight", {5}, "F16", c);
  auto f = SafetensorsFile::open(write(w.bytes()));
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->weightNames(), w.names());  // data order = insertion order
  auto e = (*f)->weight("model.embed_tokens.weight");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->type, GgmlType::F32);
  EXPECT_EQ(*dequantize(*e), a);
  auto q = (*f)->weight("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->type, GgmlType::Bf16);
  const auto qv = *dequantize(*q);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(qv[i], fp::roundBf16(b[i]));
  auto n = (*f)->weight("model.norm.weight");
  ASSERT_TRUE(n);
  const auto nv = *dequantize(*n);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(nv[i], fp::roundFp16(c[i]));
  EXPECT_EQ((*f)->findTensor("model.norm.weight")->fileOffset, (*f)->dataOffset() + 6 * 4 + 8 * 2);
}

TEST_F(Safetensors, OtherDtypesParseAndAreRefusedAtUse) {
  SafetensorsWriter w;
  w.addTensorBytes("position_ids", {4}, "I64", std::vector<uint8_t>(32, 0));
  w.addTensorBytes("scales", {3}, "F8_E4M3", std::vector<uint8_t>(3, 0));
  w.addTensorBytes("packed", {5}, "F4", std::vector<uint8_t>(0));  // 5·4 bits: not whole bytes
  expectRefused(w.bytes(), {"tensor 'packed'", "is not whole bytes"});
  SafetensorsWriter ok;
  ok.addTensorBytes("position_ids", {4}, "I64", std::vector<uint8_t>(32, 0));
  ok.addTensorBytes("packed", {6}, "F4", std::vector<uint8_t>(3, 0));
  const std::string path = write(ok.bytes());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  auto p = (*f)->weight("position_ids");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.status().code(), StatusCode::Unsupported);
  EXPECT_EQ(p.status().message(), path + ": tensor 'position_ids' has dtype I64; kvscope reads F32, F16 and BF16 weights");
  SafetensorsWriter unknown;
  unknown.addTensorBytes("x", {2}, "Q4", std::vector<uint8_t>(1, 0));
  expectRefused(unknown.bytes(), {"tensor 'x'", "unknown dtype 'Q4'"});
}

TEST_F(Safetensors, TruncatedAtEveryByte) {
  SafetensorsWriter w;
  w.addTensor("a", {2, 2}, "F32", ramp(4));
  w.addTensor("b", {3}, "F16", ramp(3));
  const auto bytes = w.bytes();
  ASSERT_TRUE(SafetensorsFile::open(write(bytes)));
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string path = write({bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n)}, "cut.safetensors");
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f) << n;
    ASSERT_EQ(f.status().message().rfind(path + ": ", 0), 0u) << f.status().message();
  }
}

TEST_F(Safetensors, HeaderLargerThanTheFile) {
  auto b = withHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  const uint64_t lie = b.size();  // more than the size - 8 bytes that follow
  std::memcpy(b.data(), &lie, 8);
  expectRefused(b, {"the header length " + std::to_string(lie) + " is larger than the rest of the file"});
  const uint64_t huge = UINT64_MAX;
  std::memcpy(b.data(), &huge, 8);
  expectRefused(b, {"the header length 18446744073709551615 is larger"});
  expectRefused({1, 2, 3}, {"too short for the 8-byte header length"});
}

TEST_F(Safetensors, HeadersThatLieAboutOffsets) {
  const std::string f32 = R"("dtype":"F32","shape":[2])";
  // Past the data section.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[0,8]}})", 4),
                {"tensor 'a'", "data_offsets [0, 8] run past the data section (4 bytes"});
  // The span disagrees with the shape.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[0,12]}})", 12),
                {"tensor 'a'", "span 12 bytes, but F32 [2] needs 8"});
  // Overlapping tensors.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[0,8]},"b":{)" + f32 + R"(,"data_offsets":[4,12]}})", 12),
                {"tensor 'b'", "start at 4, expected 8", "overlaps"});
  // A gap.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[8,16]}})", 16), {"tensor 'a'", "a gap before it"});
  // Bytes after the last tensor.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[0,8]}})", 12),
                {"the tensors cover 8 bytes of the 12-byte data section"});
  // Reversed offsets; offsets near 2^64.
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[8,0]}})", 8), {"end before they begin"});
  expectRefused(withHeader(R"({"a":{)" + f32 + R"(,"data_offsets":[18446744073709551608,18446744073709551615]}})", 8),
                {"tensor 'a'"});
  // Shapes that overflow, are negative or not integers.
  expectRefused(withHeader(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
                {"tensor 'a'", "overflows 64-bit sizes"});
  expectRefused(withHeader(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,0]}})", 0),
                {"tensor 'a'", "non-negative integers"});
  expectRefused(withHeader(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4), {"non-negative integers"});
  expectRefused(withHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                {"'data_offsets' is not a pair of non-negative integers"});
  expectRefused(withHeader(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4), {"tensor 'a': no string 'dtype'"});
  expectRefused(withHeader(R"({"a":[1,2]})", 0), {"tensor 'a': not an object"});
  expectRefused(withHeader(R"({"__metadata__":{"k":1}})", 0), {"__metadata__ 'k' is not a string"});
}

TEST_F(Safetensors, HeadersThatAreNotJsonObjects) {
  expectRefused(withHeader(R"([1,2,3])", 0), {"does not start with '{'"});
  expectRefused(withHeader(R"({"a": )", 0), {"JSON header: not valid JSON"});
  expectRefused(withHeader("{\"caf\xC3\": 1}", 0), {"the JSON header is not valid UTF-8"});
  expectRefused(withHeader(R"({"a":1e999})", 0), {"not valid JSON"});
}

TEST_F(Safetensors, HuggingFaceFolderSingleAndSharded) {
  const std::string config = R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8})";
  for (int shards : {1, 3}) {
    HfFolderWriter w(config);
    w.addTensor("model.embed_tokens.weight", {4, 8}, "BF16", ramp(32));
    w.addTensor("model.norm.weight", {8}, "F32", ramp(8));
    w.addTensor("lm_head.weight", {4, 8}, "F16", ramp(32));
    w.addTensor("model.layers.0.mlp.up_proj.weight", {2, 8}, "F32", ramp(16));
    const std::string folder = dir_.file("hf" + std::to_string(shards));
    ASSERT_TRUE(w.write(folder, shards));
    EXPECT_EQ(*detectModelFormat(folder), ModelFormat::HfFolder);
    auto hf = HfCheckpoint::open(folder);
    ASSERT_TRUE(hf) << hf.status().message();
    EXPECT_EQ((*hf)->config()["model_type"], "qwen2");
    EXPECT_EQ((*hf)->configText(), config);
    EXPECT_EQ((*hf)->files().size(), static_cast<size_t>(shards));
    EXPECT_EQ((*hf)->weightNames().size(), 4u);
    EXPECT_TRUE((*hf)->hasWeight("lm_head.weight"));
    auto n = (*hf)->weight("model.norm.weight");
    ASSERT_TRUE(n) << n.status().message();
    EXPECT_EQ(*dequantize(*n), ramp(8));
    auto absent = (*hf)->weight("model.layers.1.mlp.up_proj.weight");
    ASSERT_FALSE(absent);
    EXPECT_EQ(absent.status().message(), folder + ": tensor 'model.layers.1.mlp.up_proj.weight' is missing");
  }
}

TEST_F(Safetensors, HuggingFaceFolderRefusals) {
  auto expectFolderRefused = [](const std::string& folder, const std::vector<std::string>& phrases) {
    auto hf = HfCheckpoint::open(folder);
    ASSERT_FALSE(hf);
    for (const std::string& p : phrases)
      EXPECT_NE(hf.status().message().find(p), std::string::npos) << "'" << p << "' not in: " << hf.status().message();
  };
  const std::string config = R"({"model_type": "llama"})";
  HfFolderWriter w(config);
  w.addTensor("a", {2}, "F32", ramp(2));
  w.addTensor("b", {2}, "F32", ramp(2));
  namespace fs = std::filesystem;
  // No config.json.
  const std::string none = dir_.file("none");
  fs::create_directories(none);
  expectFolderRefused(none, {none + ": no config.json"});
  EXPECT_FALSE(detectModelFormat(none));
  // config.json not JSON.
  const std::string badConfig = dir_.file("badconfig");
  ASSERT_TRUE(HfFolderWriter("{not json").write(badConfig));
  expectFolderRefused(badConfig, {badConfig + "/config.json: not valid JSON"});
  // Weights absent.
  const std::string empty = dir_.file("noweights");
  fs::create_directories(empty);
  writeBytes(empty + "/config.json", {'{', '}'});
  expectFolderRefused(empty, {"neither model.safetensors nor model.safetensors.index.json"});
  // An index naming a shard that is missing, one that does not hold the tensor, one outside the folder.
  const std::string sharded = dir_.file("sharded");
  ASSERT_TRUE(w.write(sharded, 2));
  const std::string index = sharded + "/model.safetensors.index.json";
  auto rewrite = [&](const nlohmann::json& j) {
    const std::string t = j.dump();
    writeBytes(index, {t.begin(), t.end()});
  };
  rewrite({{"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00001-of-00002.safetensors"}}}});
  expectFolderRefused(sharded, {index + ": weight_map puts tensor 'b' in model-00001-of-00002.safetensors, which does not hold it"});
  rewrite({{"weight_map", {{"a", "model-00001-of-00009.safetensors"}}}});
  expectFolderRefused(sharded, {"model-00001-of-00009.safetensors: cannot open"});
  rewrite({{"weight_map", {{"a", "../escape.safetensors"}}}});
  expectFolderRefused(sharded, {"shards must be plain file names"});
  rewrite({{"metadata", {}}});
  expectFolderRefused(sharded, {"no 'weight_map' object"});
  // A shard that lies about its header is named.
  rewrite({{"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}});
  ASSERT_TRUE(HfCheckpoint::open(sharded));
  writeBytes(sharded + "/model-00002-of-00002.safetensors", {0xFF, 0xFF, 0, 0, 0, 0, 0, 0, '{', '}'});
  expectFolderRefused(sharded, {"model-00002-of-00002.safetensors: the header length 65535 is larger"});
}

TEST_F(Safetensors, ModelFormatIsRecognisedFromContent) {
  SafetensorsWriter s;
  s.addTensor("a", {2}, "F32", ramp(2));
  const std::string st = write(s.bytes(), "weights.bin");  // the name says nothing
  EXPECT_EQ(*detectModelFormat(st), ModelFormat::Safetensors);
  GgufWriter g;
  g.set("general.architecture", "llama");
  const std::string gg = dir_.file("model.safetensors");
  ASSERT_TRUE(g.write(gg));
  EXPECT_EQ(*detectModelFormat(gg), ModelFormat::Gguf);
  const std::string other = write({1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, "stories.bin");
  EXPECT_EQ(*detectModelFormat(other), ModelFormat::Llama2c);
  auto missing = detectModelFormat(dir_.file("nothing.gguf"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("nothing.gguf: cannot open"), std::string::npos);
  EXPECT_STREQ(modelFormatName(ModelFormat::HfFolder), "Hugging Face folder");
}

}  // namespace
}  // namespace kvscope
