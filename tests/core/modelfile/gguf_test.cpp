// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF files written by the tests' GgufWriter and read back: every metadata type in v2 and v3,
// the getters' rules and messages, alignment, tensor infos and their weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>

#include "core/modelfile/gguf.h"
#include "core/quant/ggml_blocks.h"
#include "core/modelfile/gguf_writer.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {


std::shared_ptr<const GgufFile> openOrFail(const GgufWriter& w, const test::TempDir& dir, const std::string& name = "m.gguf") {
  const std::string path = dir.file(name);
  EXPECT_TRUE(w.write(path));
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f) << f.status().message();
  return f ? *f : nullptr;
}

std::vector<float> ramp(int64_t n, float scale = 0.01f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 0.37f) * scale * static_cast<float>(i % 17);
  return v;
}

class GgufVersions : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersions, EveryMetadataTypeReadsBack) {
  GgufWriter w(GetParam());
  w.set("t.u8", uint8_t{255});
  w.set("t.i8", int8_t{-128});
  w.set("t.u16", uint16_t{65535});
  w.set("t.i16", int16_t{-32768});
  w.set("t.u32", uint32_t{4000000000u});
  w.set("t.i32", int32_t{-2147483647 - 1});
  w.set("t.f32", 1.5f);
  w.set("t.bool", true);
  w.set("t.false", false);
  w.set("t.str", "h\xC3\xA9llo \xE2\x96\x81world");  // "héllo ▁world"
  w.set("t.u64", uint64_t{1} << 40);
  w.set("t.u64big", (uint64_t{1} << 63) + 5);
  w.set("t.i64", std::numeric_limits<int64_t>::min());
  w.set("t.f64", std::numbers::pi);
  w.setArray("a.u8", std::vector<uint8_t>{1, 2, 255});
  w.setArray("a.i8", std::vector<int8_t>{-1, 0, 1});
  w.setArray("a.u16", std::vector<uint16_t>{7, 65535});
  w.setArray("a.i16", std::vector<int16_t>{-300, 300});
  w.setArray("a.u32", std::vector<uint32_t>{0, 4000000000u});
  w.setArray("a.i32", std::vector<int32_t>{-5, 5, 6});
  w.setArray("a.f32", std::vector<float>{0.5f, -2.25f});
  w.setArray("a.bool", std::vector<bool>{true, false, true});
  w.setArray("a.str", std::vector<std::string>{"a", "", "\xE4\xB8\xAD"});
  w.setArray("a.u64", std::vector<uint64_t>{3, 4});
  w.setArray("a.i64", std::vector<int64_t>{-9, 9});
  w.setArray("a.f64", std::vector<double>{1e300, -0.125});
  w.setArray("a.empty", std::vector<float>{});
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->version(), GetParam());
  EXPECT_EQ(f->entries().size(), 27u);
  EXPECT_EQ(f->entries()[0].key, "t.u8");  // file order
  EXPECT_EQ(*f->getInt("t.u8"), 255);
  EXPECT_EQ(*f->getInt("t.i8"), -128);
  EXPECT_EQ(*f->getInt("t.u16"), 65535);
  EXPECT_EQ(*f->getInt("t.i16"), -32768);
  EXPECT_EQ(*f->getInt("t.u32"), 4000000000LL);
  EXPECT_EQ(*f->getInt("t.i32"), -2147483648LL);
  EXPECT_EQ(*f->getFloat("t.f32"), 1.5);
  EXPECT_TRUE(*f->getBool("t.bool"));
  EXPECT_FALSE(*f->getBool("t.false"));
  EXPECT_EQ(*f->getString("t.str"), "h\xC3\xA9llo \xE2\x96\x81world");
  EXPECT_EQ(*f->getInt("t.u64"), int64_t{1} << 40);
  EXPECT_EQ(*f->getInt("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f->getFloat("t.f64"), std::numbers::pi);
  EXPECT_EQ(*f->getFloat("t.u32"), 4e9);  // integers read as numbers too
  EXPECT_EQ(f->find("t.u64big")->numberAt(0), 9223372036854775813.0);
  EXPECT_EQ(f->find("t.u8")->type(), GgufType::U8);
  EXPECT_EQ(f->find("a.str")->typeName(), "array of str");

  EXPECT_EQ(*f->getIntArray("a.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*f->getIntArray("a.i8"), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(*f->getIntArray("a.u16"), (std::vector<int64_t>{7, 65535}));
  EXPECT_EQ(*f->getIntArray("a.i16"), (std::vector<int64_t>{-300, 300}));
  EXPECT_EQ(*f->getIntArray("a.u32"), (std::vector<int64_t>{0, 4000000000LL}));
  EXPECT_EQ(*f->getIntArray("a.i32"), (std::vector<int64_t>{-5, 5, 6}));
  EXPECT_EQ(*f->getFloatArray("a.f32"), (std::vector<double>{0.5, -2.25}));
  const GgufValue* b = f->find("a.bool");
  ASSERT_EQ(b->size(), 3u);
  EXPECT_TRUE(b->boolAt(0));
  EXPECT_FALSE(b->boolAt(1));
  EXPECT_TRUE(b->boolAt(2));
  EXPECT_EQ(*f->getStringArray("a.str"), (std::vector<std::string>{"a", "", "\xE4\xB8\xAD"}));
  EXPECT_EQ(*f->getIntArray("a.u64"), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(*f->getIntArray("a.i64"), (std::vector<int64_t>{-9, 9}));
  EXPECT_EQ(*f->getFloatArray("a.f64"), (std::vector<double>{1e300, -0.125}));
  EXPECT_EQ(*f->getFloatArray("a.i32"), (std::vector<double>{-5, 5, 6}));
  EXPECT_TRUE(f->getFloatArray("a.empty")->empty());
  EXPECT_TRUE(f->tensors().empty());
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufVersions, ::testing::Values(2u, 3u));

TEST(Gguf, GettersNameFileKeyAndTypes) {
  GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("llama.block_count", uint32_t{2});
  w.set("big", (uint64_t{1} << 63) + 1);
  w.set("flag", true);
  w.setArray("ids", std::vector<uint32_t>{1, 2});
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  const std::string path = dir.file("m.gguf");
  auto missing = f->getInt("llama.context_length");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(), path + ": key 'llama.context_length' is missing");
  auto wrong = f->getString("llama.block_count");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.status().message(), path + ": key 'llama.block_count': expected str, found u32");
  EXPECT_NE(f->getInt("general.architecture").status().message().find("expected an integer, found str"), std::string::npos);
  EXPECT_NE(f->getInt("big").status().message().find("exceeds 2^63 - 1"), std::string::npos);
  EXPECT_NE(f->getFloat("flag").status().message().find("expected a number"), std::string::npos);
  EXPECT_NE(f->getBool("llama.block_count").status().message().find("expected bool, found u32"), std::string::npos);
  EXPECT_NE(f->getStringArray("ids").status().message().find("expected an array of str, found array of u32"),
            std::string::npos);
  EXPECT_NE(f->getIntArray("llama.block_count").status().message().find("expected an array of integers, found u32"),
            std::string::npos);
  EXPECT_NE(f->getInt("ids").status().message().find("found array of u32"), std::string::npos);
  // The *Or forms: the fallback for an absent key, the type rule for a present one.
  EXPECT_EQ(*f->getIntOr("llama.context_length", 2048), 2048);
  EXPECT_EQ(*f->getIntOr("llama.block_count", 7), 2);
  EXPECT_FALSE(f->getIntOr("general.architecture", 7));
  EXPECT_EQ(*f->getStringOr("tokenizer.ggml.pre", "default"), "default");
  EXPECT_EQ(*f->getFloatOr("llama.rope.freq_base", 10000.0), 10000.0);
  EXPECT_FALSE(*f->getBoolOr("tokenizer.ggml.add_bos_token", false));
  EXPECT_TRUE(*f->getBoolOr("flag", false));
  EXPECT_EQ(f->find("nothing"), nullptr);
}

TEST(Gguf, TensorDimsAreFastestFirstAndWeightsRowMajor) {
  GgufWriter w;
  const auto values = ramp(3 * 64);
  w.addTensor("blk.0.attn_q.weight", {3, 64}, GgmlType::F32, values);  // [out 3, in 64]
  w.addTensor("norm", {64}, GgmlType::F32, ramp(64));
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  const GgufTensorInfo* t = f->findTensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(t->bytes, 3u * 64 * 4);
  EXPECT_EQ(t->offset, 0u);
  EXPECT_EQ(f->findTensor("norm")->offset, 768u);  // 768 is already a multiple of 32
  EXPECT_EQ(f->dataOffset() % 32, 0u);
  EXPECT_EQ(f->weightNames(), (std::vector<std::string>{"blk.0.attn_q.weight", "norm"}));
  auto wt = f->weight("blk.0.attn_q.weight");
  ASSERT_TRUE(wt);
  EXPECT_EQ(wt->shape, (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(wt->rows(), 3);
  EXPECT_EQ(wt->rowLength(), 64);
  auto dq = dequantize(*wt);
  ASSERT_TRUE(dq);
  EXPECT_EQ(*dq, values);
  // Rows 1..2 only.
  std::vector<float> two(128);
  ASSERT_TRUE(dequantizeRows(*wt, 1, 2, two.data()).isOk());
  EXPECT_EQ(two[0], values[64]);
  EXPECT_EQ(two[127], values[191]);
  const Status outside = dequantizeRows(*wt, 2, 2, two.data());
  EXPECT_FALSE(outside.isOk());
  EXPECT_NE(outside.message().find("tensor 'blk.0.attn_q.weight' [3, 64] has 3 rows; asked for rows [2, 4)"),
            std::string::npos)
      << outside.message();
  auto absent = f->weight("output.weight");
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.status().message().find("tensor 'output.weight' is missing"), std::string::npos);
}

TEST(Gguf, EveryReadableTypeDequantizesAsGgml) {
  // Encodable types from floats (ggml's quantize_row_*_ref, then dequantize_row_*: the same as
  // the KV format's reference), the others from random valid blocks, decoded row by row here.
  GgufWriter w;
  w.setAlignment(64);
  const int64_t rows = 3, cols = 512;
  const auto values = ramp(rows * cols, 0.05f);
  std::vector<std::pair<std::string, GgmlType>> names;
  for (const GgmlTypeInfo& t : ggmlTypes()) {
    if (t.dequantize == nullptr) continue;
    const std::string name = std::string("w.") + t.name;
    names.emplace_back(name, t.type);
    if (t.quantize != nullptr) {
      w.addTensor(name, {rows, cols}, t.type, values);
    } else {
      w.addRandomTensor(name, {rows, cols}, t.type, 11);
    }
  }
  EXPECT_EQ(names.size(), 15u);  // f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K..q6_K iq4_nl iq4_xs bf16
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  for (const auto& [name, type] : names) {
    const GgmlTypeInfo& info = ggmlTypeInfo(type);
    auto wt = f->weight(name);
    ASSERT_TRUE(wt) << name;
    EXPECT_EQ(wt->type, type);
    EXPECT_EQ(wt->data - f->file().bytes().data(), static_cast<ptrdiff_t>(f->findTensor(name)->fileOffset));
    EXPECT_EQ(f->findTensor(name)->offset % 64, 0u) << name;
    auto dq = dequantize(*wt);
    ASSERT_TRUE(dq) << dq.status().message();
    // Expected: the same bytes decoded by the row function one row at a time.
    const std::vector<uint8_t> bytes = info.quantize ? encodeGgml(type, values) : randomGgmlBlocks(type, rows * cols, 11);
    std::vector<float> expected(static_cast<size_t>(rows * cols));
    const int64_t rowBytes = cols / info.blockSize * info.typeSize;
    for (int64_t r = 0; r < rows; ++r) info.dequantize(bytes.data() + r * rowBytes, expected.data() + r * cols, cols);
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>((*dq)[i]), std::bit_cast<uint32_t>(expected[i])) << name << " " << i;
    EXPECT_EQ(countNonFinite(dq->data(), static_cast<int64_t>(dq->size())), 0) << name;
    if (type == GgmlType::F32) {
      EXPECT_EQ(*dq, values);
    }
  }
}

TEST(Gguf, AlignmentOtherThan32) {
  for (uint32_t a : {1u, 8u, 64u, 256u}) {
    GgufWriter w;
    w.setAlignment(a);
    w.set("x", "odd-length value");
    w.addTensor("a", {1, 33}, GgmlType::F16, ramp(33));  // 66 bytes: the next tensor needs padding
    w.addTensor("b", {2, 32}, GgmlType::Q8_0, ramp(64));
    test::TempDir dir;
    auto f = openOrFail(w, dir);
    ASSERT_TRUE(f) << a;
    EXPECT_EQ(f->alignment(), a);
    EXPECT_EQ(f->dataOffset() % a, 0u);
    EXPECT_EQ(f->findTensor("b")->offset, (66 + a - 1) / a * a) << a;
    auto b = f->weight("b");
    ASSERT_TRUE(b);
    EXPECT_TRUE(dequantize(*b));
  }
}

TEST(Gguf, TypesKvscopeCannotDequantizeOpenButRefuseAtUse) {
  GgufWriter w;
  w.addTensorBytes("blk.0.ffn_down.weight", {256, 2}, static_cast<uint32_t>(GgmlType::Iq2Xxs),
                   std::vector<uint8_t>(2 * 66, 0));
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  auto wt = f->weight("blk.0.ffn_down.weight");
  ASSERT_TRUE(wt);
  std::vector<float> out(512);
  const Status st = dequantizeRows(*wt, 0, 2, out.data());
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), StatusCode::Unsupported);
  EXPECT_NE(st.message().find(dir.file("m.gguf") + ": tensor 'blk.0.ffn_down.weight' has type iq2_xxs (16)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("q4_K"), std::string::npos) << "lists the readable types: " << st.message();
}

TEST(Gguf, EmptyTensorsAndScalars) {
  GgufWriter w;
  w.addTensorBytes("empty", {0, 4}, static_cast<uint32_t>(GgmlType::F32), {});
  w.addTensorBytes("scalar", {}, static_cast<uint32_t>(GgmlType::F32), {0, 0, 0x80, 0x3F});  // 1.0f
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->findTensor("empty")->bytes, 0u);
  auto s = f->weight("scalar");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->elements(), 1);
  EXPECT_EQ((*dequantize(*s))[0], 1.0f);
}

TEST(Gguf, AVocabularyOfQwenSizeIsStoredAsViews) {
  // 151,936 tokens and 151,387 merges, as in Qwen2.5's GGUF.
  std::vector<std::string> tokens(151936), merges(151387);
  // Built piecewise: GCC 12's -Wrestrict misreads "literal" + std::string.
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::string("tok\xC4\xA0").append(std::to_string(i));
  for (size_t i = 0; i < merges.size(); ++i) merges[i] = std::string("a").append(std::to_string(i)).append(" b");
  GgufWriter w;
  w.set("tokenizer.ggml.model", "gpt2");
  w.setArray("tokenizer.ggml.tokens", tokens);
  w.setArray("tokenizer.ggml.merges", merges);
  w.setArray("tokenizer.ggml.token_type", std::vector<int32_t>(tokens.size(), 1));
  test::TempDir dir;
  auto f = openOrFail(w, dir);
  ASSERT_TRUE(f);
  auto view = f->getStringArrayView("tokenizer.ggml.tokens");
  ASSERT_TRUE(view);
  ASSERT_EQ(view->size(), tokens.size());
  EXPECT_EQ((*view)[151935], tokens[151935]);
  // The views point into the mapping: no copy of the vocabulary.
  const auto* base = reinterpret_cast<const char*>(f->file().bytes().data());
  EXPECT_GE((*view)[0].data(), base);
  EXPECT_LT((*view)[0].data(), base + f->file().size());
  EXPECT_EQ(f->getStringArray("tokenizer.ggml.merges")->back(), merges.back());
  EXPECT_EQ(f->find("tokenizer.ggml.token_type")->size(), tokens.size());
}

}  // namespace
}  // namespace kvscope
