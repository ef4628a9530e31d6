// SPDX-License-Identifier: GPL-3.0-or-later
// One view of a weight tensor whatever file it comes from (GGUF, safetensors, llama2.c), and its
// dequantization to float32 rows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/quant/ggml_types.h"
#include "core/util/status.h"

namespace kvscope {

/// A weight tensor's bytes in its file's mapping. `shape` is row-major, slowest dimension first:
/// a matrix is [out, in] and its rows are the last dimension (GGUF's dims fastest-first,
/// reversed). Valid while the file object that gave it lives.
struct WeightTensor {
  std::string name;
  std::vector<int64_t> shape;   ///< row-major, slowest first; [] for a scalar
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;           ///< rows() · rowBytes
  std::string file;             ///< the file it lives in (for messages)

  /// Values per row: the last dimension (1 for a scalar).
  [[nodiscard]] int64_t rowLength() const { return shape.empty() ? 1 : shape.back(); }
  /// Number of rows: the product of all but the last dimension.
  [[nodiscard]] int64_t rows() const;
  /// Number of values.
  [[nodiscard]] int64_t elements() const { return rows() * rowLength(); }
  /// "[896, 4864]".
  [[nodiscard]] std::string shapeText() const;
};

/// rows × rowLength float32 values of rows [firstRow, firstRow + rows) into out (row-major),
/// decoded as ggml's dequantize_row_* (bit-identical). Refuses, naming file and tensor: a type
/// kvscope cannot read (listing those it can), a row range outside the tensor. Runs the rows in
/// parallel (OpenMP) when there are many.
Status dequantizeRows(const WeightTensor& tensor, int64_t firstRow, int64_t rows, float* out);
/// The whole tensor as float32 (row-major).
Expected<std::vector<float>> dequantize(const WeightTensor& tensor);
/// Refuses, naming file and tensor, when the type cannot be dequantized.
Status checkReadable(const WeightTensor& tensor);

/// How many of the n values are NaN or infinite (check a layer's weights after dequantizing).
int64_t countNonFinite(const float* values, int64_t n);

/// A file (or folder) of named weights.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  /// The file or folder, as given.
  [[nodiscard]] virtual const std::string& path() const = 0;
  /// Every weight's name, in the file's order.
  [[nodiscard]] virtual std::vector<std::string> weightNames() const = 0;
  /// True when a weight of that name exists.
  [[nodiscard]] virtual bool hasWeight(std::string_view name) const = 0;
  /// The weight, or an error naming the file and the tensor (absent; a type that has no ggml
  /// equivalent, such as safetensors' I32).
  [[nodiscard]] virtual Expected<WeightTensor> weight(std::string_view name) const = 0;
};

}  // namespace kvscope
