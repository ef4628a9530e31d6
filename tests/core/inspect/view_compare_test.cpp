// SPDX-License-Identifier: GPL-3.0-or-later
// The A/B comparison's per-head computations (core/inspect/view_compare.h) on hand-computed
// tensors: counts on given bins, and the signed change in error binned by the largest |d|.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/inspect/view_compare.h"
#include "core/inspect/view_data.h"

namespace kvscope {
namespace {

TEST(CountOnEdges, HandCountedWithClampingAtTheOuterBins) {
  // One head of 2 tokens × 3 channels; bins [0,1), [1,2), [2,3] of edges 0, 1, 2, 3.
  Tensor3 x(2, 2, 3, 0.0f);
  const float head1[] = {0.5f, 1.0f, 2.99f,   // token 0
                         -4.0f, 7.0f, 1.5f};  // token 1: −4 counts in bin 0, 7 in bin 2
  for (int i = 0; i < 6; ++i) x.at(1, i / 3, i % 3) = head1[i];
  const std::vector<double> edges{0, 1, 2, 3};
  std::vector<double> counts;
  countOnEdges(x, 1, HistogramScope::Head, 0, edges, counts);
  EXPECT_EQ(counts, (std::vector<double>{2, 2, 2}));
  countOnEdges(x, 1, HistogramScope::Token, 1, edges, counts);
  EXPECT_EQ(counts, (std::vector<double>{1, 1, 1}));
  countOnEdges(x, 1, HistogramScope::Channel, 2, edges, counts);  // 2.99 and 1.5
  EXPECT_EQ(counts, (std::vector<double>{0, 1, 1}));
  countOnEdges(x, 0, HistogramScope::Head, 0, edges, counts);  // six zeros
  EXPECT_EQ(counts, (std::vector<double>{6, 0, 0}));
  countOnEdges(x, 2, HistogramScope::Head, 0, edges, counts);  // no such head
  EXPECT_TRUE(counts.empty());
}

TEST(CountOnEdges, EqualsTheHistogramsOwnReconstructedCounts) {
  // A reconstruction counted on the histogram's own edges gives its `reconstructed` counts:
  // the same bin rule, so the A line and the B line of the GUI are comparable bin for bin.
  Tensor3 x(1, 64, 16, 0.0f), hat(1, 64, 16, 0.0f);
  for (int t = 0; t < 64; ++t) {
    for (int c = 0; c < 16; ++c) {
      x.at(0, t, c) = static_cast<float>(((t * 31 + c * 17) % 97) - 48) / 7.0f;
      hat.at(0, t, c) = static_cast<float>(std::lround(x.at(0, t, c)));
    }
  }
  HistogramWorkspace workspace;
  HistogramData data;
  computeHistogramInto(x, 0, &hat, 0, HistogramScope::Head, 0, 37, workspace, data);
  std::vector<double> counts;
  countOnEdges(hat, 0, HistogramScope::Head, 0, data.edges, counts);
  EXPECT_EQ(counts, data.reconstructed);
  countOnEdges(x, 0, HistogramScope::Head, 0, data.edges, counts);
  EXPECT_EQ(counts, data.original);
}

TEST(ErrorDifference, SignedChangeWithTheLargestMagnitudePerBin) {
  // One channel, 4 tokens in 2 columns. x = 1 everywhere.
  // A errors: 0.5, 0,   0,   0.25   B errors: 0, 0.25, 0.75, 0  → d = B − A: −0.5, 0.25, 0.75, −0.25
  Tensor3 x(1, 4, 1, 1.0f), a(1, 4, 1, 1.0f), b(1, 4, 1, 1.0f);
  a.at(0, 0, 0) = 1.5f;
  a.at(0, 3, 0) = 0.75f;
  b.at(0, 1, 0) = 1.25f;
  b.at(0, 2, 0) = 0.25f;
  HeatmapData d;
  computeErrorDifferenceInto(x, 0, a, 0, b, 0, 2, d);
  ASSERT_EQ(d.columns, 2);
  ASSERT_EQ(d.channels, 1);
  EXPECT_FLOAT_EQ(d.cell(0, 0), -0.5f);  // |−0.5| > |0.25|: the sign is kept
  EXPECT_EQ(d.cellToken[0], 0);
  EXPECT_FLOAT_EQ(d.cell(0, 1), 0.75f);
  EXPECT_EQ(d.cellToken[1], 2);
  EXPECT_FLOAT_EQ(d.maxValue, 0.75f);
  EXPECT_FLOAT_EQ(d.minPositive, 0.5f);
  EXPECT_FLOAT_EQ(d.channelMax[0], 0.75f);
  // One column per token: every d.
  computeErrorDifferenceInto(x, 0, a, 0, b, 0, 100, d);
  ASSERT_EQ(d.columns, 4);
  EXPECT_EQ(d.cells, (std::vector<float>{-0.5f, 0.25f, 0.75f, -0.25f}));
  // Equal reconstructions: zero everywhere.
  computeErrorDifferenceInto(x, 0, a, 0, a, 0, 4, d);
  EXPECT_EQ(d.cells, (std::vector<float>(4, 0.0f)));
  EXPECT_EQ(d.maxValue, 0.0f);
  // Mismatched shapes give an empty map, not a crash.
  Tensor3 shorter(1, 3, 1, 1.0f);
  computeErrorDifferenceInto(x, 0, shorter, 0, b, 0, 4, d);
  EXPECT_EQ(d.columns, 0);
  EXPECT_TRUE(d.cells.empty());
}

}  // namespace
}  // namespace kvscope
