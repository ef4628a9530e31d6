// SPDX-License-Identifier: GPL-3.0-or-later
// The behaviour the format table's rows point at (format_table.cpp): step 5's fast kernels and
// scalar references, the histogram's groups and the group counts of each family of formats.
// Callers go through the row (formatInfo(id).quantizeFast, …) or formats.h, never these names.
#pragma once

#include <cstdint>

#include "core/quant/formats.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope::format_ops {

// ---- Fast kernels (formats.cpp) ----
Status groupedFast(Tensor3& x, const QuantSpec& spec);   ///< int, fp8, nf4 (kernels_grouped.h)
Status blocksFast(Tensor3& x, const QuantSpec& spec);    ///< the row's blockKernel on every block
Status fp16Fast(Tensor3& x, const QuantSpec& spec);
Status bf16Fast(Tensor3& x, const QuantSpec& spec);
Status tqFast(Tensor3& x, const QuantSpec& spec);
Status tqpFast(Tensor3& x, const QuantSpec& spec);
Status tqgFast(Tensor3& x, const QuantSpec& spec);
Status lmdeployFast(Tensor3& x, const QuantSpec& spec);  ///< lmtq, lmqjl
Status nuqFast(Tensor3& x, const QuantSpec& spec);
Status hqqFast(Tensor3& x, const QuantSpec& spec);
/// none, fp32: the values as they are (both the reference and the fast path).
Status unchanged(Tensor3& x, const QuantSpec& spec);

// ---- Fast kernels on pieces (formats.cpp) ----
void groupedPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);
void blocksPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);
void fp16Piece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);
void bf16Piece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);
void unchangedPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);

// ---- Scalar references (reference.cpp) ----
Status groupedReference(Tensor3& x, const QuantSpec& spec);
Status blocksReference(Tensor3& x, const QuantSpec& spec);  ///< the row's blockReference per block of a token row
Status fp16Reference(Tensor3& x, const QuantSpec& spec);
Status bf16Reference(Tensor3& x, const QuantSpec& spec);
Status tqReference(Tensor3& x, const QuantSpec& spec);
Status tqpReference(Tensor3& x, const QuantSpec& spec);
Status tqgReference(Tensor3& x, const QuantSpec& spec);
Status lmdeployReference(Tensor3& x, const QuantSpec& spec);
Status nuqReference(Tensor3& x, const QuantSpec& spec);
Status hqqReference(Tensor3& x, const QuantSpec& spec);

// ---- The histogram's group of one element (formats.cpp) ----
Expected<GroupDetail> describeGrouped(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                      int64_t channel);
Expected<GroupDetail> describeBlock(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                    int64_t channel);
Expected<GroupDetail> describeSphere(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                     int64_t channel);  ///< tq, tqp
Expected<GroupDetail> describeTqg(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t channel);
Expected<GroupDetail> describeLmdeploy(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                       int64_t channel);
Expected<GroupDetail> describeNuq(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t channel);
Expected<GroupDetail> describeHqq(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t channel);
Expected<GroupDetail> describeFp16(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                   int64_t channel);
Expected<GroupDetail> describeBf16(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                   int64_t channel);
/// none, fp32: the element alone, kept as it is.
Expected<GroupDetail> describeExact(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                    int64_t channel);

// ---- Group counts (formats.cpp) ----
int64_t groupsByAxis(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim);    ///< axis=/group=
int64_t groupsPerBlock(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim);  ///< blocks of the row
int64_t groupsPerVector(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim); ///< one per token vector
int64_t groupsFlat(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim);      ///< hqq: n / G

}  // namespace kvscope::format_ops
