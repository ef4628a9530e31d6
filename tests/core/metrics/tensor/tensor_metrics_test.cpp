// SPDX-License-Identifier: GPL-3.0-or-later
// Tensor metrics of quantization.md §7 against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/metrics/tensor_metrics.h"

namespace kvscope {
namespace {

TEST(TensorMetrics, HandComputedValuesPerHead) {
  // Head 0: x = [1, 2, 3, 4], x̂ = [1, 2, 3, 5]: one error of 1.
  // Head 1: x = [1, -1, 2, -2], x̂ = [1.5, -1, 2, -2.5]: errors 0.5 and -0.5.
  Tensor3 x(2, 2, 2), y(2, 2, 2);
  x.data = {1, 2, 3, 4, 1, -1, 2, -2};
  y.data = {1, 2, 3, 5, 1.5f, -1, 2, -2.5f};
  auto m = tensorMetrics(x, y);
  ASSERT_TRUE(m.hasValue());
  ASSERT_EQ(m->size(), 2u);
  const TensorMetrics& a = (*m)[0];
  EXPECT_DOUBLE_EQ(a.mse, 0.25);
  EXPECT_DOUBLE_EQ(a.relError, 1.0 / std::sqrt(30.0));
  ASSERT_TRUE(a.sqnrDb.has_value());
  EXPECT_DOUBLE_EQ(*a.sqnrDb, 10.0 * std::log10(30.0));
  EXPECT_DOUBLE_EQ(a.maxAbsError, 1.0);
  const TensorMetrics& b = (*m)[1];
  EXPECT_DOUBLE_EQ(b.mse, 0.5 / 4);
  EXPECT_DOUBLE_EQ(b.relError, std::sqrt(0.5 / 10.0));
  EXPECT_DOUBLE_EQ(*b.sqnrDb, 10.0 * std::log10(10.0 / 0.5));
  EXPECT_DOUBLE_EQ(b.maxAbsError, 0.5);
}

TEST(TensorMetrics, ZeroErrorHasNoSqnr) {
  Tensor3 x(1, 3, 2);
  x.data = {1, 2, 3, 4, 5, 6};
  auto m = tensorMetrics(x, x);
  ASSERT_TRUE(m.hasValue());
  EXPECT_EQ((*m)[0].mse, 0.0);
  EXPECT_EQ((*m)[0].relError, 0.0);
  EXPECT_EQ((*m)[0].maxAbsError, 0.0);
  EXPECT_FALSE((*m)[0].sqnrDb.has_value());
}

TEST(TensorMetrics, ZeroReferenceWithErrorIsInfinitelyBad) {
  Tensor3 x(1, 1, 2), y(1, 1, 2);
  y.data = {0.5f, 0};
  auto m = tensorMetrics(x, y);
  ASSERT_TRUE(m.hasValue());
  EXPECT_TRUE(std::isinf((*m)[0].relError));
  ASSERT_TRUE((*m)[0].sqnrDb.has_value());
  EXPECT_TRUE(std::isinf(*(*m)[0].sqnrDb) && *(*m)[0].sqnrDb < 0);
}

TEST(TensorMetrics, AccumulatesInDoubleOverManyElements) {
  // 2^20 errors of 1e-4 on values of 1: float accumulation would drift visibly.
  const int64_t n = int64_t{1} << 20;
  Tensor3 x(1, n, 1, 1.0f), y(1, n, 1, 1.0f + 1e-4f);
  auto m = tensorMetrics(x, y);
  ASSERT_TRUE(m.hasValue());
  const double e = double(1.0f + 1e-4f) - 1.0;
  EXPECT_NEAR((*m)[0].mse, e * e, e * e * 1e-9);
  EXPECT_NEAR((*m)[0].relError, e, e * 1e-9);
}

TEST(TensorMetrics, ShapeMismatchIsAnError) {
  EXPECT_FALSE(tensorMetrics(Tensor3(1, 2, 3), Tensor3(1, 3, 2)).hasValue());
}

}  // namespace
}  // namespace kvscope
