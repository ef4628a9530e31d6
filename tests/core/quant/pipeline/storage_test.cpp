// SPDX-License-Identifier: GPL-3.0-or-later
// Storage accounting of quantization.md §5 against hand-computed bits per element.
#include <gtest/gtest.h>

#include <string>

#include "core/quant/format_table.h"
#include "core/quant/quantize.h"

namespace kvscope {
namespace {

double bpe(const std::string& text, int64_t kvh, int64_t t, int64_t d) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? storageFor(*s, kvh, t, d).bitsPerElement() : -1;
}

TEST(Storage, BitsPerElementOfEachFormat) {
  // A layer of 8 kv heads, 256 tokens, head dim 128: every group and block divides evenly.
  const int64_t kvh = 8, t = 256, d = 128;
  EXPECT_DOUBLE_EQ(bpe("int4,group=128", kvh, t, d), 4.25);   // 4 + (16 scale + 16 min) / 128
  EXPECT_DOUBLE_EQ(bpe("int4,sym,group=128", kvh, t, d), 4.125);  // 4 + 16 / 128
  EXPECT_DOUBLE_EQ(bpe("int4,group=32,scale=fp32", kvh, t, d), 6.0);  // 4 + 64 / 32
  EXPECT_DOUBLE_EQ(bpe("int8,axis=channel", kvh, t, d), 8.0 + 32.0 / 256);
  EXPECT_DOUBLE_EQ(bpe("int2,axis=head", kvh, t, d), 2.0 + 32.0 / (256 * 128));
  EXPECT_DOUBLE_EQ(bpe("q4_0", kvh, t, d), 4.5);
  EXPECT_DOUBLE_EQ(bpe("q8_0", kvh, t, d), 8.5);
  EXPECT_DOUBLE_EQ(bpe("q4_1", kvh, t, d), 5.0);
  EXPECT_DOUBLE_EQ(bpe("q5_0", kvh, t, d), 5.5);
  EXPECT_DOUBLE_EQ(bpe("q5_1", kvh, t, d), 6.0);
  EXPECT_DOUBLE_EQ(bpe("iq4_nl", kvh, t, d), 4.5);
  EXPECT_DOUBLE_EQ(bpe("mxfp4", kvh, t, d), 4.25);
  // nvfp4: 4 + 8/16 per element and one fp32 global scale per layer tensor of N elements.
  EXPECT_DOUBLE_EQ(bpe("nvfp4", kvh, t, d), 4.5 + 32.0 / double(kvh * t * d));
  EXPECT_DOUBLE_EQ(bpe("nf4", kvh, t, d), 4.25);            // 4 + 16 / 64
  EXPECT_DOUBLE_EQ(bpe("fp8_e4m3", kvh, t, d), 8.0 + 32.0 / double(kvh * t * d));
  EXPECT_DOUBLE_EQ(bpe("fp8_e4m3,unitscale", kvh, t, d), 8.0);
  EXPECT_DOUBLE_EQ(bpe("fp8_e5m2,axis=token", kvh, t, d), 8.0 + 32.0 / 128);
  EXPECT_DOUBLE_EQ(bpe("fp16", kvh, t, d), 16.0);
  EXPECT_DOUBLE_EQ(bpe("bf16", kvh, t, d), 16.0);
  EXPECT_DOUBLE_EQ(bpe("none", kvh, t, d), 16.0);
}

TEST(Storage, KiviTwoBitOn32kTokens) {
  // KVH=8, T=32768, D=128, residual 128: 32640 quantized tokens.
  // Keys, axis=channel, runs of 32 tokens: ceil(32640/32) = 1020 runs per (head, channel),
  //   8·128·1020 = 1,044,480 groups × 32 bits (fp16 scale + min) = 33,423,360 bits.
  // Payload: 2 bits × 8·32640·128 = 66,846,720. Kept: 16 × 8·128·128 = 2,097,152.
  // Total 102,367,232 bits / (8·32768·128 = 33,554,432) = 3.05078125 bits per element.
  // Values, axis=token, runs of 32 channels: 8·32640·4 = 1,044,480 groups as well.
  EXPECT_DOUBLE_EQ(bpe("int2,axis=channel,group=32,residual=128", 8, 32768, 128), 3.05078125);
  EXPECT_DOUBLE_EQ(bpe("int2,axis=token,group=32,residual=128", 8, 32768, 128), 3.05078125);
  auto s = parseSpec("int2,axis=channel,group=32,residual=128");
  ASSERT_TRUE(s.hasValue());
  StorageCount c = storageFor(*s, 8, 32768, 128);
  EXPECT_EQ(c.payloadBits, 66846720.0);
  EXPECT_EQ(c.metadataBits, 33423360.0);
  EXPECT_EQ(c.keptBits, 2097152.0);
  EXPECT_EQ(c.outlierBits, 0.0);
  EXPECT_EQ(c.elements, 33554432);
}

TEST(Storage, ShorterLastRunStillStoresAScale) {
  // 1 head, 10 quantized tokens, D=4, channel runs of 4 tokens: runs 4,4,2 → 3 per channel.
  // 10·4·3 payload + 4·3 groups × 32 + 0 = 120 + 384 = 504 bits over 40 elements.
  EXPECT_DOUBLE_EQ(bpe("int3,axis=channel,group=4", 1, 10, 4), 504.0 / 40);
}

TEST(Storage, OutliersAndKeptTokens) {
  // 2 heads, 100 tokens, D=16; sinks 4 + residual 6 keep 10 tokens; 90·16 = 1440 quantized
  // elements per head, ceil(0.01·1440) = 15 outliers per head.
  // payload 4·2·1440 = 11520; metadata per token (2·90 groups) × 32 = 5760;
  // outliers 48·30 = 1440; kept 16·2·10·16 = 5120; total 23840 over 3200 elements.
  EXPECT_DOUBLE_EQ(bpe("int4,sinks=4,residual=6,outliers=0.01", 2, 100, 16), 23840.0 / 3200);
  // All tokens kept: 16 bits each, whatever the format.
  EXPECT_DOUBLE_EQ(bpe("q4_0,sinks=60,residual=60", 2, 100, 16), 16.0);
}

TEST(Storage, FormatTableBlockFormatsMatchSpecBitsPerElement) {
  // Every block format's payload + block metadata, read from the one table.
  for (const FormatInfo& f : formatTable()) {
    if (f.kind != FormatKind::Block) continue;
    const double want = f.payloadBits + double(f.blockMetaBits) / f.blockSize;
    const int64_t kvh = 2, t = 8, d = 64;
    EXPECT_DOUBLE_EQ(bpe(std::string(f.name), kvh, t, d), want + double(f.tensorMetaBits) / double(kvh * t * d))
        << f.name;
  }
}

}  // namespace
}  // namespace kvscope
