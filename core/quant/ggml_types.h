// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's tensor types as one table (after ggml.c's type_traits): ggml's id and name, the block
// geometry, how kvscope reads and writes each, and the KV-cache format of the same layout. The
// ids are ggml's `enum ggml_type` (ggml/include/ggml.h), which GGUF files store.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/quant/format_table.h"
#include "core/util/status.h"

namespace kvscope {

/// ggml's type ids (ggml.h `enum ggml_type`); ids ggml removed (4, 5, 31-33, 36-38) are absent.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  Iq2Xxs = 16,
  Iq2Xs = 17,
  Iq3Xxs = 18,
  Iq1S = 19,
  Iq4Nl = 20,
  Iq3S = 21,
  Iq2S = 22,
  Iq4Xs = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  Iq1M = 29,
  Bf16 = 30,
  Tq1_0 = 34,
  Tq2_0 = 35,
  Mxfp4 = 39,
};

/// n values (a multiple of blockSize) from packed blocks (any alignment) into float32.
using GgmlDequantizeRow = void (*)(const uint8_t* blocks, float* out, int64_t n);
/// n values (a multiple of blockSize) into packed blocks, as ggml's from_float_ref.
using GgmlQuantizeRow = void (*)(const float* x, uint8_t* blocks, int64_t n);

/// One row of the table.
struct GgmlTypeInfo {
  GgmlType type{};
  const char* name = "";     ///< ggml's type_name ("f32", "q8_0", "q4_K", "iq4_xs", "bf16")
  int64_t blockSize = 1;     ///< values per block
  int64_t typeSize = 0;      ///< bytes per block
  GgmlDequantizeRow dequantize = nullptr;  ///< ggml's dequantize_row_*; nullptr: kvscope cannot read the type
  GgmlQuantizeRow quantize = nullptr;      ///< ggml's quantize_row_*_ref; nullptr: kvscope has no encoder
  std::optional<FormatId> format;          ///< the KV-cache format with this layout, if any
};

/// Every type of the table, by id.
std::span<const GgmlTypeInfo> ggmlTypes();
/// The row of a type.
const GgmlTypeInfo& ggmlTypeInfo(GgmlType type);
/// The row of a raw id from a file; nullptr when the id is not a ggml type kvscope knows.
const GgmlTypeInfo* ggmlTypeInfo(uint32_t id);
/// The row of a name, case-insensitive ("Q8_0", "q4_k", "bf16"); nullptr when unknown.
const GgmlTypeInfo* ggmlTypeByName(std::string_view name);
/// "q4_K (12)": a type's name and id for messages; "unknown type 41" for an id not in the table.
std::string ggmlTypeLabel(uint32_t id);
/// The names of the types kvscope can dequantize, comma-separated (for messages).
std::string ggmlReadableTypeNames();

/// Bytes of n values of a type: InvalidArgument when n is not a multiple of the block size or
/// the size overflows 64 bits.
Expected<uint64_t> ggmlBytes(GgmlType type, uint64_t n);

}  // namespace kvscope
