// SPDX-License-Identifier: GPL-3.0-or-later
// The format table's rows carry their behaviour (format_table.h): every row has what the parser,
// storage, capacity, the end-to-end store and the GUI call, its fast kernel (where it has one)
// gives bit for bit what its reference gives, and a row without a fast kernel runs its reference.
// Every test iterates formatTable(): a new row is covered with no count to edit.
#include <cmath>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/spec.h"
#include "core/quant/storage.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x.data) v = normal(rng);
  for (size_t i = 0; i < x.data.size(); i += 61) x.data[i] *= 5.0f;  // heavy tails
  return x;
}

// The row's default spec, with hqq's groups small enough for the test tensors.
QuantSpec rowSpec(const FormatInfo& info) {
  QuantSpec s = defaultSpec(info.id);
  if (info.flatGroups) s.group = 16;
  return s;
}

// Bit for bit, signed zeros included.
void expectBitIdentical(const Tensor3& a, const Tensor3& b, const std::string& what) {
  ASSERT_TRUE(a.sameShape(b)) << what;
  int64_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ba = 0, bb = 0;
    std::memcpy(&ba, &a.data[i], sizeof ba);
    std::memcpy(&bb, &b.data[i], sizeof bb);
    if (ba != bb) {
      if (mismatches < 3) ADD_FAILURE() << what << ": element " << i << " " << a.data[i] << " vs " << b.data[i];
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST(FormatRows, EveryRowHasTheBehaviourItsCallersNeed) {
  for (const FormatInfo& info : formatTable()) {
    SCOPED_TRACE(std::string(info.name));
    EXPECT_NE(info.quantizeReference, nullptr);
    EXPECT_NE(info.describeGroup, nullptr);
    EXPECT_NE(info.streaming, nullptr);
    EXPECT_NE(info.quantizesPerHead, nullptr);
    // A piece kernel is the fast kernel on pieces: without one the general path runs.
    if (info.quantizePiece != nullptr) {
      EXPECT_NE(info.quantizeFast, nullptr);
    }
    if (info.blockSize > 0) {
      EXPECT_NE(info.blockReference, nullptr);
      EXPECT_NE(info.blockScale, nullptr);
      EXPECT_NE(info.groupCount, nullptr);
      EXPECT_LE(info.blockCodeLo, info.blockCodeHi);
      EXPECT_LE(info.blockCodeHi - info.blockCodeLo + 1, 1 << static_cast<int>(info.payloadBits));
      // The block fast path calls the kernel: a row with a fast path has one.
      if (info.quantizeFast != nullptr) {
        EXPECT_NE(info.blockKernel, nullptr);
      }
    } else {
      EXPECT_EQ(info.blockKernel, nullptr);
      EXPECT_EQ(info.blockReference, nullptr);
    }
    // Grouped formats count groups; a row that stores metadata per group must count them.
    if (info.grouped || info.scalesPerGroup > 0) {
      EXPECT_NE(info.groupCount, nullptr);
    }
    // A format the parser accepts by name has a default spec the parser gives back.
    const QuantSpec def = defaultSpec(info.id);
    const auto parsed = parseSpec(toString(def));
    ASSERT_TRUE(parsed) << parsed.status().message();
    EXPECT_EQ(*parsed, def);
  }
}

// Row by row, the fast kernel and the reference on the same random data, called through the
// row's own pointers: the same bits.
TEST(FormatRows, FastKernelIsBitIdenticalToReference) {
  const Tensor3 x = randomTensor(2, 20, 64, 3);
  for (const FormatInfo& info : formatTable()) {
    if (info.quantizeFast == nullptr) continue;
    const QuantSpec spec = rowSpec(info);
    Tensor3 fast = x, ref = x;
    ASSERT_TRUE(checkFormatSpec(x, spec).isOk()) << info.name;
    ASSERT_TRUE(info.quantizeFast(fast, spec).isOk()) << info.name;
    ASSERT_TRUE(info.quantizeReference(ref, spec).isOk()) << info.name;
    expectBitIdentical(fast, ref, std::string(info.name));
  }
}

// A row without a fast kernel (here each row with its fast pointers removed, as a new row that
// has only its reference would be) runs its reference: quantizeFormatWith gives the reference's
// bits and never reaches a missing kernel.
TEST(FormatRows, RowWithoutFastKernelRunsItsReference) {
  const Tensor3 x = randomTensor(2, 12, 64, 9);
  for (const FormatInfo& info : formatTable()) {
    FormatInfo referenceOnly = info;
    referenceOnly.quantizeFast = nullptr;
    referenceOnly.quantizePiece = nullptr;
    referenceOnly.blockKernel = nullptr;
    referenceOnly.blockFromKernel = nullptr;
    const QuantSpec spec = rowSpec(info);
    Tensor3 viaRow = x, ref = x;
    ASSERT_TRUE(quantizeFormatWith(referenceOnly, viaRow, spec).isOk()) << info.name;
    ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk()) << info.name;
    expectBitIdentical(viaRow, ref, std::string(info.name) + " without a fast kernel");
  }
}

// Storage reads only the row: payload bits × values, the row's metadata per group in the
// `scale=` type, per block, per tensor and per codebook entry, checked against the same sums
// written out by hand from the row's numbers for every row.
TEST(FormatRows, StorageIsTheRowsNumbers) {
  const int64_t kvh = 2, tokens = 32, dim = 64;
  for (const FormatInfo& info : formatTable()) {
    if (info.payload != nullptr) continue;  // hqq's packing: storage_test's hand vectors
    const QuantSpec spec = rowSpec(info);
    const StorageCount s = storageFor(spec, kvh, tokens, dim);
    const double n = static_cast<double>(kvh * tokens * dim);
    const double groups = static_cast<double>(groupCount(spec, kvh, tokens, dim));
    const double payload = info.hasBits ? spec.bits : info.payloadBits;
    const double valueBits = spec.scale == MetaType::Fp32 ? 32 : 16;
    const double perGroup = info.scalesPerGroup + (info.asymMin && !spec.symmetric ? 1 : 0);
    // Only codebook rows carry 2^b entries; float rows have b = 16 or 32, where 1 << b is undefined.
    const double codebook =
        info.codebookEntryBits > 0 ? info.codebookEntryBits * std::ldexp(1.0, spec.bits) : 0.0;
    EXPECT_EQ(s.payloadBits, payload * n) << info.name;
    EXPECT_EQ(s.metadataBits,
              groups * perGroup * valueBits + groups * info.blockMetaBits + info.tensorMetaBits + codebook)
        << info.name;
    EXPECT_EQ(s.elements, kvh * tokens * dim);
  }
}

}  // namespace
}  // namespace kvscope
