// SPDX-License-Identifier: GPL-3.0-or-later
// kvfp4: SGLang's `--kv-cache-dtype fp4_e2m1` cache (docs/formats.md "kvfp4"). The vectors are
// worked by hand from sgl-project/sglang python/sglang/srt/layers/quantization/kvfp4_tensor.py
// (commit 0dae407b), FP4MXBlock16KVQuantizeUtil.batched_quantize (lines 66-100 of that version):
//   block_max = |x|.max() over 16 values; scale_exp = ceil(log2(clamp(block_max / 6, min=1e-10)));
//   scaled = x / 2^scale_exp; magnitude code = #(|scaled| >= E2M1_BOUNDS), E2M1_BOUNDS =
//   (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5); sign bit = scaled < 0; and batched_dequantize (lines
//   102-136): E2M1_VALUES[code] · 2^(scale_factor − 127) with scale_factor = scale_exp + 127.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/kernels_block.h"
#include "core/quant/quantize.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec kvfp4() {
  auto s = parseSpec("kvfp4");
  EXPECT_TRUE(s.hasValue());
  return *s;
}

std::vector<float> padded(std::vector<float> v) {
  v.resize(16, 0.0f);
  return v;
}

// One token row of blocks through the fast path and the reference.
void expectBlocks(const std::vector<std::vector<float>>& in, const std::vector<std::vector<float>>& out) {
  std::vector<float> x, want;
  for (size_t b = 0; b < in.size(); ++b) {
    const auto i = padded(in[b]), o = padded(out[b]);
    x.insert(x.end(), i.begin(), i.end());
    want.insert(want.end(), o.begin(), o.end());
  }
  Tensor3 fast(1, 1, static_cast<int64_t>(x.size())), ref(1, 1, static_cast<int64_t>(x.size()));
  fast.data = ref.data = x;
  ASSERT_TRUE(quantizeFormatInPlace(fast, kvfp4()).isOk());
  ASSERT_TRUE(quantizeFormatReference(ref, kvfp4()).isOk());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(fast.data[i], want[i]) << "fast, value " << i << " (" << x[i] << ")";
    EXPECT_EQ(ref.data[i], want[i]) << "reference, value " << i << " (" << x[i] << ")";
  }
}

TEST(Kvfp4, TableRowAndStorage) {
  const FormatInfo* f = findFormat("kvfp4");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, FormatKind::Block);
  EXPECT_EQ(f->blockSize, 16);
  // k_buffer (m, n, k // 2) uint8 and k_scale_buffer (m, n·k // 16) uint8 (memory_pool.py
  // MHATokenToKVPoolFP4._create_buffers): 4 + 8/16 bits per element.
  EXPECT_DOUBLE_EQ(f->payloadBits + static_cast<double>(f->blockMetaBits) / f->blockSize, 4.5);
  const StorageCount s = storageFor(kvfp4(), 8, 100, 128);
  EXPECT_DOUBLE_EQ(s.totalBits() / 8.0 / 100.0, 8 * (128 / 2 + 128 / 16));  // 576 bytes per token
}

TEST(Kvfp4, ScaleIsCeilLog2OfMaxOverSix) {
  // a = 5: log2(5/6) = -0.26 -> e = 0, scale 1. Ties go up: 0.25 -> 0.5, 0.75 -> 1, 1.25 -> 1.5,
  // 1.75 -> 2, 2.5 -> 3, 3.5 -> 4, 5 -> 6 (mxfp4's ties-to-even would give 0, 1, 1, 2, 2, 4, 4).
  // -0.2 -> code 8 (sign set, magnitude 0) = -0.
  // 0.24 and 4.9 sit just below bounds: 0 and 4.
  expectBlocks({{5.0f, 0.25f, 0.75f, 1.25f, -1.75f, 2.5f, 3.5f, -0.2f, 0.24f, 4.9f}},
               {{6.0f, 0.5f, 1.0f, 1.5f, -2.0f, 3.0f, 4.0f, -0.0f, 0.0f, 4.0f}});
  Tensor3 x(1, 1, 16);
  x.data = padded({5.0f, -0.2f});
  ASSERT_TRUE(quantizeFormatInPlace(x, kvfp4()).isOk());
  EXPECT_TRUE(std::signbit(x.data[1]));  // code 8: the sign bit survives
}

TEST(Kvfp4, PowerOfTwoMaximaKeepTheirExponent) {
  // a = 6: y = 1 -> e = 0: 6 -> 6. a = 12: y = 2 -> e = 1, scale 2: 12 -> 12, 7/2 = 3.5 -> 4 -> 8.
  // a = next float above 12: y = 2.0000002 -> e = 2, scale 4: 12.000001/4 -> 3 -> 12; 7/4 = 1.75 -> 2 -> 8;
  // 5/4 = 1.25 -> 1.5 -> 6.
  const float above12 = std::nextafter(12.0f, 13.0f);
  expectBlocks({{6.0f, -2.9f}, {12.0f, 7.0f}, {above12, 7.0f, 5.0f}},
               {{6.0f, -3.0f}, {12.0f, 8.0f}, {12.0f, 8.0f, 6.0f}});
  EXPECT_EQ(kernels::kvfp4Exponent(6.0f), 0);
  EXPECT_EQ(kernels::kvfp4Exponent(12.0f), 1);
  EXPECT_EQ(kernels::kvfp4Exponent(above12), 2);
}

TEST(Kvfp4, SmallBlocksAndTheClampAt1em10) {
  // a = 0.1: log2(0.016667) = -5.91 -> e = -5, scale 1/32: 0.1·32 = 3.2 -> 3 -> 0.09375;
  // 0.03·32 = 0.96 -> 1 -> 0.03125; 0.0078125·32 = 0.25 -> 0.5 -> 0.015625 (a tie, upward).
  // All zeros: y clamps to 1e-10 -> e = ceil(-33.2) = -33; every value stays 0.
  // a = 1e-12: y = 1.7e-13 clamps to 1e-10 -> e = -33, scale 1.16e-10: 1e-12/scale = 0.0086 -> 0.
  expectBlocks({{0.1f, 0.03f, 0.0078125f}, {}, {1e-12f, -1e-12f}},
               {{0.09375f, 0.03125f, 0.015625f}, {}, {0.0f, -0.0f}});
  EXPECT_EQ(kernels::kvfp4Exponent(0.0f), -33);
  EXPECT_EQ(kernels::kvfp4Exponent(0.1f), -5);
}

TEST(Kvfp4, BlocksRunAlongTheTokenRowAcrossHeads) {
  // SGLang views [tokens, heads, D] as [tokens, heads·D/16, 16]: with D = 8 a block holds two heads.
  Tensor3 x(2, 1, 8), ref(2, 1, 8);
  for (int d = 0; d < 8; ++d) {
    x.at(0, 0, d) = 0.7f;
    x.at(1, 0, d) = d == 0 ? 12.0f : 0.7f;
  }
  ref = x;
  ASSERT_TRUE(quantizeFormatInPlace(x, kvfp4()).isOk());
  ASSERT_TRUE(quantizeFormatReference(ref, kvfp4()).isOk());
  // One block, a = 12 -> scale 2: 0.7/2 = 0.35 -> 0.5 -> 1.0 in both heads.
  EXPECT_EQ(x.at(0, 0, 3), 1.0f);
  EXPECT_EQ(x.at(1, 0, 0), 12.0f);
  EXPECT_EQ(ref.at(0, 0, 3), 1.0f);
}

}  // namespace
}  // namespace kvscope
