// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/capacity/capacity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/capacity/units.h"

namespace kvscope {
namespace {

QuantSpec spec(const char* text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? *s : QuantSpec{};
}

CapacityRequest llama3_8b(const char* key, const char* value) {
  CapacityRequest r;
  r.shape = {32, 8, 128};
  r.key = spec(key);
  r.value = spec(value);
  r.memoryBytes = 80.0 * (1ull << 30);
  r.weightsBytes = 16.0 * (1ull << 30);
  r.context = 8192;
  return r;
}

TEST(Capacity, Llama3_8bFp16IsOneHundredTwentyEightKibPerToken) {
  auto rep = planCapacity(llama3_8b("none", "fp16"));
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  // 2 tensors · 32 layers · 8 heads · 128 dims · 2 bytes.
  EXPECT_DOUBLE_EQ(rep->fp16.bytesPerToken, 131072.0);
  EXPECT_DOUBLE_EQ(rep->quantized.bytesPerToken, 131072.0);
  // 64 GiB left: 2^36 / 2^17 tokens, 64 sequences of 8192.
  EXPECT_DOUBLE_EQ(rep->availableBytes, 64.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(rep->fp16.tokensFit, 524288.0);
  EXPECT_EQ(rep->fp16.sequencesFit, 64);
  EXPECT_TRUE(rep->fp16.batchFits);
}

TEST(Capacity, TokenGroupsAddTheirScalesAndMins) {
  // int4 asym per token (group = D = 128): 4 + 2·16/128 = 4.25 bits; K+V per layer
  // 2 · 8 · 128 · 4.25 / 8 = 1088 bytes, 32 layers = 34816.
  auto rep = planCapacity(llama3_8b("int4", "int4"));
  ASSERT_TRUE(rep.hasValue());
  EXPECT_DOUBLE_EQ(rep->quantized.keyBitsPerElement, 4.25);
  EXPECT_DOUBLE_EQ(rep->quantized.bytesPerToken, 34816.0);
  EXPECT_DOUBLE_EQ(rep->quantized.tokensFit, std::floor(64.0 * (1ull << 30) / 34816.0));
}

TEST(Capacity, ChannelGroupsAndKeptTokensDependOnTheContext) {
  // KIVI-2 keys at context 1024: 896 quantized tokens in 28 runs of 32 per channel.
  CapacityRequest r = llama3_8b("int2,axis=channel,group=32,residual=128", "fp16");
  r.context = 1024;
  auto rep = planCapacity(r);
  ASSERT_TRUE(rep.hasValue());
  const double payload = 2.0 * 8 * 896 * 128;
  const double meta = 8.0 * 128 * 28 * 2 * 16;
  const double kept = 16.0 * 8 * 128 * 128;
  const double keyBits = payload + meta + kept;
  EXPECT_NEAR(rep->quantized.keyBitsPerElement, keyBits / (8.0 * 1024 * 128), 1e-12);
  const double valueBits = 16.0 * 8 * 1024 * 128;
  EXPECT_NEAR(rep->quantized.bytesPerToken, 32 * (keyBits + valueBits) / 8 / 1024, 1e-9);
}

TEST(Capacity, DecodeStepIsTheRooflineOfBytesAndOps) {
  CapacityRequest r = llama3_8b("int8,sym,axis=tensor", "fp16");
  r.context = 1000;
  r.batch = 2;
  r.decode = DecodeHardware{"custom", 1e12, 1e12, "test"};
  auto rep = planCapacity(r);
  ASSERT_TRUE(rep.hasValue());
  const DecodeCost& f = *rep->fp16.decode;
  EXPECT_DOUBLE_EQ(f.bytesRead, 2.0 * 1000 * 131072);
  EXPECT_EQ(f.dequantOps, 0.0);
  EXPECT_DOUBLE_EQ(f.seconds, f.bytesRead / 1e12);
  EXPECT_TRUE(f.memoryBound);
  // int8 sym: decode + scale = 2 ops per element, one scale per layer tensor = 1 op.
  const DecodeCost& q = *rep->quantized.decode;
  EXPECT_DOUBLE_EQ(q.dequantOps, 2.0 * 32 * (8.0 * 1000 * 128 * 2 + 1));
  // A slow ALU makes the same step compute-bound.
  r.decode->opsPerSecond = 1e6;
  auto slow = planCapacity(r);
  ASSERT_TRUE(slow.hasValue());
  EXPECT_FALSE(slow->quantized.decode->memoryBound);
  EXPECT_DOUBLE_EQ(slow->quantized.decode->seconds, q.dequantOps / 1e6);
}

TEST(Capacity, BatchThatDoesNotFitIsReported) {
  CapacityRequest r = llama3_8b("fp16", "fp16");
  r.batch = 65;  // 64 sequences of 8192 fit in 64 GiB
  auto rep = planCapacity(r);
  ASSERT_TRUE(rep.hasValue());
  EXPECT_FALSE(rep->fp16.batchFits);
}

TEST(Capacity, RejectsImpossibleRequests) {
  CapacityRequest r = llama3_8b("fp16", "fp16");
  r.context = 0;
  EXPECT_FALSE(planCapacity(r).hasValue());
  r = llama3_8b("int4,prerope", "fp16");
  r.value = spec("int4,prerope");  // prerope on values
  EXPECT_FALSE(planCapacity(r).hasValue());
  r = llama3_8b("fp16", "fp16");
  r.shape.kvHeads = 0;
  EXPECT_FALSE(planCapacity(r).hasValue());
}

TEST(DequantOps, FollowTheDocumentedModel) {
  EXPECT_EQ(dequantOps(spec("int4")).perElement, 5.0);      // unpack 2, convert, mul, add
  EXPECT_EQ(dequantOps(spec("int4")).perGroup, 2.0);        // scale and min
  EXPECT_EQ(dequantOps(spec("int8,sym")).perElement, 2.0);
  EXPECT_EQ(dequantOps(spec("fp8_e4m3,unitscale")).perElement, 1.0);
  EXPECT_EQ(dequantOps(spec("q5_1")).perElement, 8.0);
  EXPECT_EQ(dequantOps(spec("none")).perElement, 0.0);
}

TEST(Devices, TableHasDatasheetBandwidths) {
  ASSERT_NE(findDevice("h200"), nullptr);
  EXPECT_DOUBLE_EQ(findDevice("h200")->bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(findDevice("h100")->bandwidth, 3.35e12);
  EXPECT_EQ(findDevice("tpu"), nullptr);
  for (const DeviceInfo& d : deviceTable()) {
    EXPECT_GT(d.int8Dense, d.fp16Dense) << d.name;
    EXPECT_FALSE(d.source.empty());
  }
}

TEST(Units, ParsesSizesAndRates) {
  EXPECT_DOUBLE_EQ(*parseByteSize("80GiB"), 80.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*parseByteSize("16GB"), 16e9);
  EXPECT_DOUBLE_EQ(*parseByteSize("512 MiB"), 512.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(*parseByteSize("4096"), 4096.0);
  EXPECT_DOUBLE_EQ(*parseBandwidth("4.8TB/s"), 4.8e12);
  EXPECT_DOUBLE_EQ(*parseBandwidth("1TiB/s"), 1099511627776.0);
  EXPECT_DOUBLE_EQ(*parseOpRate("60Tops/s"), 60e12);
  EXPECT_DOUBLE_EQ(*parseOpRate("989.5TFLOPS"), 989.5e12);
}

TEST(Units, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GB", "80XB", "-5GB", "80GiB/s", "1e999GB"}) {
    auto r = parseByteSize(bad, "--memory");
    ASSERT_FALSE(r.hasValue()) << bad;
    EXPECT_NE(r.status().message().find("--memory"), std::string::npos);
    EXPECT_NE(r.status().message().find("examples"), std::string::npos);
  }
  EXPECT_FALSE(parseBandwidth("4.8TB").hasValue());  // a size, not a rate
  EXPECT_FALSE(parseOpRate("60TB/s").hasValue());
  EXPECT_FALSE(parseOpRate("60Tiops/s").hasValue());
}

}  // namespace
}  // namespace kvscope
