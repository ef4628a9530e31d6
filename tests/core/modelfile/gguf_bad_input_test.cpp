// SPDX-License-Identifier: GPL-3.0-or-later
// Hostile GGUF files (issue 28, "Bad input"): each must be refused with InvalidData, a message
// naming the file and the key or tensor, no read outside the mapping (the asan preset runs
// these) and no allocation sized by a count the file cannot hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/modelfile/gguf.h"
#include "core/modelfile/gguf_writer.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {


std::vector<uint8_t> u64(uint64_t v) {
  std::vector<uint8_t> b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
std::vector<uint8_t> u32(uint32_t v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class GgufBadInput : public ::testing::Test {
 protected:
  std::string write(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
    const std::string path = dir_.file(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  /// Opens the bytes, expects a refusal whose message contains the path and every phrase.
  void expectRefused(const std::vector<uint8_t>& bytes, const std::vector<std::string>& phrases) {
    const std::string path = write(bytes);
    auto f = GgufFile::open(path);
    ASSERT_FALSE(f) << "accepted; expected: " << phrases.front();
    EXPECT_EQ(f.status().code(), StatusCode::InvalidData) << f.status().message();
    const std::string m = f.status().message();
    EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;
    for (const std::string& p : phrases) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
  static GgufWriter small() {
    GgufWriter w;
    w.set("general.architecture", "llama");
    w.set("llama.block_count", uint32_t{1});
    w.setArray("tokenizer.ggml.tokens", std::vector<std::string>{"<s>", "a", "\xC4\xA0"});
    w.setArray("tokenizer.ggml.scores", std::vector<float>{0, -1, -2});
    w.set("f64", 2.5);
    const std::vector<float> v(32, 0.25f);
    w.addTensor("token_embd.weight", {4, 8}, GgmlType::F32, v);  // 128 bytes: no padding after it
    w.addTensor("output.weight", {1, 32}, GgmlType::Q8_0, v);
    w.addTensorBytes("norm", {30}, static_cast<uint32_t>(GgmlType::F16), std::vector<uint8_t>(60, 0));
    w.addTensorBytes("pad", {2}, static_cast<uint32_t>(GgmlType::F16), std::vector<uint8_t>(4, 0));
    return w;
  }
  test::TempDir dir_;
};

TEST_F(GgufBadInput, TheSmallFileIsValid) {
  auto f = GgufFile::open(write(small().bytes()));
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)->tensors().size(), 4u);
}

TEST_F(GgufBadInput, TruncatedAtEveryByte) {
  // The last tensor ends exactly at the end of the file, so every shorter prefix lacks something.
  const std::vector<uint8_t> bytes = small().bytes();
  auto whole = GgufFile::open(write(bytes));
  ASSERT_TRUE(whole) << whole.status().message();
  ASSERT_EQ((*whole)->findTensor("pad")->fileOffset + 4 + 28, bytes.size())
      << "the writer pads the last tensor to 32: the last 28 bytes are padding";
  const size_t needed = bytes.size() - 28;
  for (size_t n = 0; n < needed; ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    const std::string path = write(prefix, "cut.gguf");
    auto f = GgufFile::open(path);
    ASSERT_FALSE(f) << "a prefix of " << n << " of " << bytes.size() << " bytes was accepted";
    ASSERT_EQ(f.status().code(), StatusCode::InvalidData) << n;
    ASSERT_EQ(f.status().message().rfind(path + ": ", 0), 0u) << f.status().message();
  }
  // Dropping only trailing padding leaves every tensor whole: that file is fine.
  const std::vector<uint8_t> unpadded(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(needed));
  EXPECT_TRUE(GgufFile::open(write(unpadded)));
}

TEST_F(GgufBadInput, WrongMagic) {
  auto b = small().bytes();
  std::memcpy(b.data(), "GGJT", 4);
  expectRefused(b, {"not a GGUF file: it starts with 'GGJT', expected 'GGUF'"});
  std::memcpy(b.data(), "\x00\x01GU", 4);
  expectRefused(b, {"'\\x00\\x01GU'"});
  expectRefused({'G', 'G'}, {"too short for the 4-byte magic"});
}

TEST_F(GgufBadInput, Versions) {
  GgufWriter w = small();
  w.setVersion(1);
  expectRefused(w.bytes(), {"header", "GGUF version 1 is no longer read"});
  w.setVersion(4);
  expectRefused(w.bytes(), {"unsupported GGUF version 4 (kvscope reads 2 and 3)"});
  w.setVersion(0x03000000);
  expectRefused(w.bytes(), {"big-endian"});
}

TEST_F(GgufBadInput, UnknownTensorType) {
  for (uint32_t id : {4u, 41u, 0xFFFFFFFFu}) {
    GgufWriter w = small();
    w.addTensorBytes("blk.0.attn_k.weight", {32}, id, std::vector<uint8_t>(64, 0));
    expectRefused(w.bytes(), {"tensor 'blk.0.attn_k.weight'", "unknown ggml type " + std::to_string(id)});
  }
}

TEST_F(GgufBadInput, TensorDataPastTheEnd) {
  GgufWriter w = small();
  w.addTensorBytes("late", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0), uint64_t{1} << 20);
  expectRefused(w.bytes(), {"tensor 'late'", "runs past the end of the file"});
  GgufWriter huge = small();
  huge.addTensorBytes("huge", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0),
                      UINT64_MAX - 31);  // aligned, and offset + bytes overflows
  expectRefused(huge.bytes(), {"tensor 'huge'", "runs past the end of the file", "beyond 2^64"});
  // A tensor whose declared dims need more bytes than the file has.
  GgufWriter big = small();
  big.addTensorBytes("big", {4096, 4096}, static_cast<uint32_t>(GgmlType::F32), {});
  expectRefused(big.bytes(), {"tensor 'big'", "67108864 bytes", "past the end"});
}

TEST_F(GgufBadInput, MisalignedAndOverlappingTensors) {
  GgufWriter w = small();
  w.addTensorBytes("odd", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0), 4);
  expectRefused(w.bytes(), {"tensor 'odd'", "data offset 4 is not a multiple of the alignment 32"});
  GgufWriter o = small();
  o.addTensorBytes("again", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0), 0);
  expectRefused(o.bytes(), {"overlaps tensor"});
}

TEST_F(GgufBadInput, CountsAndLengthsNear2To64) {
  // Header counts.
  auto b = small().bytes();
  for (uint64_t count : {uint64_t{INT64_MAX}, uint64_t{1} << 40}) {
    auto kv = b;
    std::memcpy(kv.data() + 16, &count, 8);
    expectRefused(kv, {"header", "metadata entries cannot fit"});
    auto tn = b;
    std::memcpy(tn.data() + 8, &count, 8);
    expectRefused(tn, {"header", "tensor infos cannot fit"});
  }
  auto negative = b;
  const int64_t minus = -1;
  std::memcpy(negative.data() + 8, &minus, 8);
  expectRefused(negative, {"negative tensor count -1"});
  // An array whose count is near 2^64: numbers and strings.
  for (uint32_t type : {0u, 10u, 8u}) {
    GgufWriter w = small();
    w.setRaw("tokenizer.ggml.merges", 9, cat({u32(type), u64(UINT64_MAX)}));
    expectRefused(w.bytes(), {"key 'tokenizer.ggml.merges'", "array of 18446744073709551615"});
  }
  // String lengths near 2^64: a value, an array element, a key, a tensor name.
  GgufWriter s = small();
  s.setRaw("general.name", 8, u64(UINT64_MAX));
  expectRefused(s.bytes(), {"key 'general.name'", "has length 18446744073709551615", "more than the"});
  GgufWriter e = small();
  e.setRaw("tokenizer.ggml.merges", 9, cat({u32(8), u64(2), u64(1), {'a'}, u64(UINT64_MAX - 3)}));
  expectRefused(e.bytes(), {"key 'tokenizer.ggml.merges'", "string 1 of the array of 2 str", "18446744073709551612"});
  auto key = GgufWriter().bytes();  // header only: add one entry by hand with a huge key length
  const int64_t one = 1;
  std::memcpy(key.data() + 16, &one, 8);
  const auto k = u64(UINT64_MAX);
  key.insert(key.end(), k.begin(), k.end());
  key.resize(key.size() + 16, 0);
  expectRefused(key, {"metadata entry 0 of 1", "the key has length 18446744073709551615"});
  GgufWriter t = small();
  t.addTensorBytes("x", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0));
  auto tb = t.bytes();
  // Patch the last tensor info's name length ('x' is 1 byte: find "\x01\0\0\0\0\0\0\0x").
  const std::string needle("\x01\0\0\0\0\0\0\0x", 9);
  auto at = std::search(tb.begin(), tb.end(), needle.begin(), needle.end());
  ASSERT_NE(at, tb.end());
  std::memcpy(&*at, u64(UINT64_MAX).data(), 8);
  expectRefused(tb, {"tensor info 4 of 5", "the tensor name has length 18446744073709551615"});
}

TEST_F(GgufBadInput, DimsThatOverflowOrAreNegative) {
  GgufWriter w = small();
  w.addTensorBytes("wide", {int64_t{1} << 40, int64_t{1} << 40}, static_cast<uint32_t>(GgmlType::F32), {});
  expectRefused(w.bytes(), {"tensor 'wide'", "hold more than 2^63 values"});
  GgufWriter b = small();
  b.addTensorBytes("bytes", {int64_t{1} << 62, 1}, static_cast<uint32_t>(GgmlType::F32), {});
  expectRefused(b.bytes(), {"tensor 'bytes'", "overflow 64-bit sizes"});
  GgufWriter n = small();
  n.addTensorBytes("neg", {-32}, static_cast<uint32_t>(GgmlType::F32), {});
  expectRefused(n.bytes(), {"tensor 'neg'", "dimension 0 is -32 (negative)"});
  GgufWriter d = small();
  d.addTensorBytes("5d", {1, 1, 1, 1, 1}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(4, 0));
  expectRefused(d.bytes(), {"tensor '5d'", "5 dimensions; ggml tensors have at most 4"});
  GgufWriter q = small();
  q.addTensorBytes("q", {48, 2}, static_cast<uint32_t>(GgmlType::Q8_0), std::vector<uint8_t>(102, 0));
  expectRefused(q.bytes(), {"tensor 'q'", "type q8_0 packs blocks of 32 values, and rows of 48"});
}

TEST_F(GgufBadInput, InvalidUtf8) {
  GgufWriter v = small();
  v.set("general.name", "caf\xC3");  // a lead byte with no continuation
  expectRefused(v.bytes(), {"key 'general.name'", "the string is not valid UTF-8"});
  GgufWriter a = small();
  a.setArray("tokenizer.ggml.tokens", std::vector<std::string>{"ok", "\xED\xA0\x80"});  // a surrogate
  expectRefused(a.bytes(), {"key 'tokenizer.ggml.tokens'", "string 1 of the array of 2 str is not valid UTF-8"});
  GgufWriter k = small();
  k.set("bad\xFFkey", uint32_t{1});
  expectRefused(k.bytes(), {"metadata entry 5 of 6", "the key is not valid UTF-8"});
  GgufWriter t = small();
  t.addTensorBytes("blk.\xC0\xAF", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0));  // overlong '/'
  expectRefused(t.bytes(), {"tensor info 4 of 5", "the tensor name is not valid UTF-8"});
}

TEST_F(GgufBadInput, ArraysOfArraysAndUnknownValueTypes) {
  GgufWriter w = small();
  w.setRaw("nested", 9, cat({u32(9), u32(4), u64(1), u32(7)}));
  expectRefused(w.bytes(), {"key 'nested'", "an array of arrays", "invalid GGUF type 9"});
  GgufWriter t = small();
  t.setRaw("weird", 13, {});
  expectRefused(t.bytes(), {"key 'weird'", "invalid GGUF value type 13"});
  GgufWriter e = small();
  e.setRaw("weird", 9, cat({u32(200), u64(0)}));
  expectRefused(e.bytes(), {"key 'weird'", "invalid GGUF array element type 200"});
}

TEST_F(GgufBadInput, DuplicatesEmptyKeysAndAlignment) {
  GgufWriter d = small();
  d.appendRaw("llama.block_count", 4, u32(2));  // a second entry under the same key
  auto bytes = d.bytes();
  expectRefused(bytes, {"key 'llama.block_count'", "appears twice (entries 1 and 5)"});
  GgufWriter t = small();
  t.addTensorBytes("norm", {8}, static_cast<uint32_t>(GgmlType::F32), std::vector<uint8_t>(32, 0));
  expectRefused(t.bytes(), {"tensor 'norm'", "appears twice (tensor infos 2 and 4)"});
  GgufWriter e = small();
  e.set("", uint8_t{1});
  expectRefused(e.bytes(), {"metadata entry 5", "the key is empty"});
  for (uint32_t a : {0u, 48u}) {
    GgufWriter w = small();
    w.set("general.alignment", a);
    expectRefused(w.bytes(), {"key 'general.alignment'", std::to_string(a) + " is not a power of two"});
  }
  GgufWriter u = small();
  u.set("general.alignment", uint64_t{32});
  expectRefused(u.bytes(), {"key 'general.alignment'", "expected u32", "found u64"});
}

}  // namespace
}  // namespace kvscope
