// SPDX-License-Identifier: GPL-3.0-or-later
// The table of ggml types. Block sizes and type sizes from ggml.c's type_traits and the block
// structs of ggml-common.h (e.g. q8_K: float d, 256 int8, 16 int16 sums = 292 bytes).
#include "core/quant/ggml_types.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/quant/ggml_blocks.h"

namespace kvscope {
namespace {

using namespace ggml;  // NOLINT(google-build-using-namespace): the row functions

constexpr int64_t kK = ggml::kQkK;

/// A type kvscope knows the geometry of but neither reads nor writes.
constexpr GgmlTypeInfo opaque(GgmlType type, const char* name, int64_t blockSize, int64_t typeSize) {
  return {.type = type, .name = name, .blockSize = blockSize, .typeSize = typeSize, .dequantize = nullptr,
          .quantize = nullptr, .format = std::nullopt};
}

const std::array<GgmlTypeInfo, 32> kTypes{{
    {.type = GgmlType::F32, .name = "f32", .blockSize = 1, .typeSize = 4, .dequantize = &dequantizeRowF32,
     .quantize = &quantizeRowF32, .format = FormatId::Fp32},
    {.type = GgmlType::F16, .name = "f16", .blockSize = 1, .typeSize = 2, .dequantize = &dequantizeRowF16,
     .quantize = &quantizeRowF16, .format = FormatId::Fp16},
    {.type = GgmlType::Q4_0, .name = "q4_0", .blockSize = 32, .typeSize = 18, .dequantize = &dequantizeRowQ4_0,
     .quantize = &quantizeRowQ4_0, .format = FormatId::Q4_0},
    {.type = GgmlType::Q4_1, .name = "q4_1", .blockSize = 32, .typeSize = 20, .dequantize = &dequantizeRowQ4_1,
     .quantize = &quantizeRowQ4_1, .format = FormatId::Q4_1},
    {.type = GgmlType::Q5_0, .name = "q5_0", .blockSize = 32, .typeSize = 22, .dequantize = &dequantizeRowQ5_0,
     .quantize = &quantizeRowQ5_0, .format = FormatId::Q5_0},
    {.type = GgmlType::Q5_1, .name = "q5_1", .blockSize = 32, .typeSize = 24, .dequantize = &dequantizeRowQ5_1,
     .quantize = &quantizeRowQ5_1, .format = FormatId::Q5_1},
    {.type = GgmlType::Q8_0, .name = "q8_0", .blockSize = 32, .typeSize = 34, .dequantize = &dequantizeRowQ8_0,
     .quantize = &quantizeRowQ8_0, .format = FormatId::Q8_0},
    opaque(GgmlType::Q8_1, "q8_1", 32, 36),
    {.type = GgmlType::Q2_K, .name = "q2_K", .blockSize = kK, .typeSize = 84, .dequantize = &dequantizeRowQ2K,
     .quantize = nullptr, .format = std::nullopt},
    {.type = GgmlType::Q3_K, .name = "q3_K", .blockSize = kK, .typeSize = 110, .dequantize = &dequantizeRowQ3K,
     .quantize = nullptr, .format = std::nullopt},
    {.type = GgmlType::Q4_K, .name = "q4_K", .blockSize = kK, .typeSize = 144, .dequantize = &dequantizeRowQ4K,
     .quantize = nullptr, .format = std::nullopt},
    {.type = GgmlType::Q5_K, .name = "q5_K", .blockSize = kK, .typeSize = 176, .dequantize = &dequantizeRowQ5K,
     .quantize = nullptr, .format = std::nullopt},
    {.type = GgmlType::Q6_K, .name = "q6_K", .blockSize = kK, .typeSize = 210, .dequantize = &dequantizeRowQ6K,
     .quantize = nullptr, .format = std::nullopt},
    opaque(GgmlType::Q8_K, "q8_K", kK, 292),
    opaque(GgmlType::Iq2Xxs, "iq2_xxs", kK, 66),
    opaque(GgmlType::Iq2Xs, "iq2_xs", kK, 74),
    opaque(GgmlType::Iq3Xxs, "iq3_xxs", kK, 98),
    opaque(GgmlType::Iq1S, "iq1_s", kK, 50),
    {.type = GgmlType::Iq4Nl, .name = "iq4_nl", .blockSize = 32, .typeSize = 18, .dequantize = &dequantizeRowIq4Nl,
     .quantize = &quantizeRowIq4Nl, .format = FormatId::Iq4Nl},
    opaque(GgmlType::Iq3S, "iq3_s", kK, 110),
    opaque(GgmlType::Iq2S, "iq2_s", kK, 82),
    {.type = GgmlType::Iq4Xs, .name = "iq4_xs", .blockSize = kK, .typeSize = 136, .dequantize = &dequantizeRowIq4Xs,
     .quantize = nullptr, .format = std::nullopt},
    opaque(GgmlType::I8, "i8", 1, 1),
    opaque(GgmlType::I16, "i16", 1, 2),
    opaque(GgmlType::I32, "i32", 1, 4),
    opaque(GgmlType::I64, "i64", 1, 8),
    opaque(GgmlType::F64, "f64", 1, 8),
    opaque(GgmlType::Iq1M, "iq1_m", kK, 56),
    {.type = GgmlType::Bf16, .name = "bf16", .blockSize = 1, .typeSize = 2, .dequantize = &dequantizeRowBf16,
     .quantize = &quantizeRowBf16, .format = FormatId::Bf16},
    opaque(GgmlType::Tq1_0, "tq1_0", kK, 54),
    opaque(GgmlType::Tq2_0, "tq2_0", kK, 66),
    opaque(GgmlType::Mxfp4, "mxfp4", 32, 17),
}};

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::span<const GgmlTypeInfo> ggmlTypes() { return kTypes; }

const GgmlTypeInfo* ggmlTypeInfo(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeInfo& ggmlTypeInfo(GgmlType type) {
  const GgmlTypeInfo* t = ggmlTypeInfo(static_cast<uint32_t>(type));
  return t != nullptr ? *t : kTypes[0];  // every enumerator has a row (tested)
}

const GgmlTypeInfo* ggmlTypeByName(std::string_view name) {
  for (const GgmlTypeInfo& t : kTypes)
    if (equalsIgnoringCase(t.name, name)) return &t;
  return nullptr;
}

std::string ggmlTypeLabel(uint32_t id) {
  const GgmlTypeInfo* t = ggmlTypeInfo(id);
  if (t == nullptr) return "unknown type " + std::to_string(id);
  return std::string(t->name) + " (" + std::to_string(id) + ")";
}

std::string ggmlReadableTypeNames() {
  std::string out;
  for (const GgmlTypeInfo& t : kTypes) {
    if (t.dequantize == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

Expected<uint64_t> ggmlBytes(GgmlType type, uint64_t n) {
  const GgmlTypeInfo& t = ggmlTypeInfo(type);
  const auto bs = static_cast<uint64_t>(t.blockSize), ts = static_cast<uint64_t>(t.typeSize);
  if (n % bs != 0)
    return Status::invalidArgument(std::to_string(n) + " values of " + t.name + " are not a whole number of blocks of " +
                                   std::to_string(bs));
  const uint64_t blocks = n / bs;
  if (blocks > UINT64_MAX / ts) return Status::invalidArgument(std::to_string(n) + " values of " + t.name + " overflow 64-bit sizes");
  return blocks * ts;
}

}  // namespace kvscope
