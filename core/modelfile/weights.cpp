// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/modelfile/weights.h"

#include <cmath>

namespace kvscope {

int64_t WeightTensor::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
  return r;
}

std::string WeightTensor::shapeText() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status checkReadable(const WeightTensor& t) {
  const GgmlTypeInfo& info = ggmlTypeInfo(t.type);
  if (info.dequantize == nullptr)
    return Status::unsupported(t.file + ": tensor '" + t.name + "' has type " +
                               ggmlTypeLabel(static_cast<uint32_t>(t.type)) +
                               ", which kvscope cannot dequantize (it reads " + ggmlReadableTypeNames() + ")");
  return Status::ok();
}

Status dequantizeRows(const WeightTensor& t, int64_t firstRow, int64_t rows, float* out) {
  KVS_RETURN_IF_ERROR(checkReadable(t));
  const int64_t total = t.rows();
  if (firstRow < 0 || rows < 0 || firstRow > total || rows > total - firstRow)
    return Status::invalidArgument(t.file + ": tensor '" + t.name + "' " + t.shapeText() + " has " +
                                   std::to_string(total) + " rows; asked for rows [" + std::to_string(firstRow) +
                                   ", " + std::to_string(firstRow + rows) + ")");
  const GgmlTypeInfo& info = ggmlTypeInfo(t.type);
  const int64_t n = t.rowLength();
  if (n % info.blockSize != 0)  // the readers refuse such tensors; a hand-made view may not
    return Status::invalidArgument(t.file + ": tensor '" + t.name + "': rows of " + std::to_string(n) +
                                   " values are not whole blocks of " + std::to_string(info.blockSize));
  const int64_t rowBytes = n / info.blockSize * info.typeSize;
  if (static_cast<uint64_t>(rowBytes) * static_cast<uint64_t>(total) > t.bytes)
    return Status::invalidArgument(t.file + ": tensor '" + t.name + "' holds " + std::to_string(t.bytes) +
                                   " bytes, fewer than its shape needs");
  const GgmlDequantizeRow fn = info.dequantize;
  const uint8_t* base = t.data + firstRow * rowBytes;
  // Threads pay off from about a few hundred thousand values; below that one thread is faster.
  const bool parallel = rows > 1 && rows * n >= (1 << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) fn(base + r * rowBytes, out + r * n, n);
  return Status::ok();
}

Expected<std::vector<float>> dequantize(const WeightTensor& t) {
  KVS_RETURN_IF_ERROR(checkReadable(t));
  std::vector<float> out(static_cast<size_t>(t.elements()));
  KVS_RETURN_IF_ERROR(dequantizeRows(t, 0, t.rows(), out.data()));
  return out;
}

int64_t countNonFinite(const float* values, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n >= (1 << 20))
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(values[i]) ? 0 : 1;
  return bad;
}

}  // namespace kvscope
