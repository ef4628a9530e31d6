// SPDX-License-Identifier: GPL-3.0-or-later
// The drift view's computation (core/inspect/drift.h) against attention's own whole-layer
// functions: the row must be attentionRowDetail's of the whole layer and the series that kv
// head's line of attentionPositionSeries, whether the reconstructions hold the layer or one head.
#include "core/inspect/drift.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/inspect/drift_data.h"
#include "core/inspect/view_data.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t heads, int64_t tokens, int64_t dim, uint32_t seed) {
  Tensor3 x(heads, tokens, dim);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  // Heads of different scale, so that a slice of the wrong head cannot pass for the right one.
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t d = 0; d < dim; ++d) x.at(h, t, d) = static_cast<float>(h + 1) * n(rng);
    }
  }
  return x;
}

void expectClose(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1e-3 + std::abs(b[i]))) << what << " " << i;
}

void expectSameCase(const AttentionRowCase& a, const AttentionRowCase& b, const char* what) {
  expectClose(a.scores, b.scores, what);
  expectClose(a.probabilities, b.probabilities, what);
  EXPECT_NEAR(a.kl, b.kl, 1e-9 + 1e-6 * std::abs(b.kl)) << what;
  EXPECT_NEAR(a.outputRelError, b.outputRelError, 1e-9 + 1e-6 * std::abs(b.outputRelError)) << what;
  EXPECT_EQ(a.top1, b.top1) << what;
}

struct Layer {
  static constexpr int64_t kvHeads = 3, group = 2, tokens = 20, dim = 8, queries = 5;
  Tensor3 key = randomTensor(kvHeads, tokens, dim, 21), value = randomTensor(kvHeads, tokens, dim, 22);
  Tensor3 query = randomTensor(kvHeads * group, queries, dim, 23);
  Tensor3 keyHat, valueHat;
  double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  Layer() {
    keyHat = key;
    valueHat = value;
    for (float& x : keyHat.data) x = std::round(x * 4.0f) / 4.0f;
    for (float& x : valueHat.data) x = std::round(x * 2.0f) / 2.0f;
  }
  [[nodiscard]] AttentionInput whole() const {
    AttentionInput in{&query, &key, &value, &keyHat, &valueHat};
    in.softmaxScale = scale;
    return in;
  }
};

// The whole layer's K, V, queries and reconstructions, for the row (queryHead, queryIndex).
DriftInput inputOf(const Layer& l, int64_t hatHead, int queryHead, int queryIndex) {
  DriftInput in;
  in.key = &l.key;
  in.value = &l.value;
  in.query = &l.query;
  in.keyHat = &l.keyHat;
  in.valueHat = &l.valueHat;
  in.hatHead = hatHead;
  in.queryHead = queryHead;
  in.queryIndex = queryIndex;
  in.softmaxScale = l.scale;
  return in;
}

TEST(ComputeDrift, RowAndSeriesAreTheWholeLayersForTheQueryHeadsKvHead) {
  const Layer l;
  const int queryHead = 3, queryIndex = 2;  // kv head 1
  auto wholeRow = attentionRowDetail(l.whole(), queryHead, queryIndex);
  ASSERT_TRUE(wholeRow.hasValue()) << wholeRow.status().message();
  auto wholeSeries = attentionPositionSeries(l.whole(), SeriesGrouping::KvHead);
  ASSERT_TRUE(wholeSeries.hasValue()) << wholeSeries.status().message();

  Tensor3 keyHatHead, valueHatHead;
  copyHeads(l.keyHat, 1, 1, keyHatHead);
  copyHeads(l.valueHat, 1, 1, valueHatHead);
  // The reconstructions of the whole layer (hat head = the kv head), then of that head alone.
  for (bool oneHead : {false, true}) {
    SCOPED_TRACE(oneHead ? "one head's reconstruction" : "the whole layer's reconstruction");
    DriftInput in;
    in.key = &l.key;
    in.value = &l.value;
    in.query = &l.query;
    in.keyHat = oneHead ? &keyHatHead : &l.keyHat;
    in.valueHat = oneHead ? &valueHatHead : &l.valueHat;
    in.hatHead = oneHead ? 0 : 1;
    in.queryHead = queryHead;
    in.queryIndex = queryIndex;
    in.softmaxScale = l.scale;
    DriftWorkspace ws;
    auto drift = computeDrift(in, ws);
    ASSERT_TRUE(drift.hasValue()) << drift.status().message();
    EXPECT_EQ(drift->kvHead, 1);
    ASSERT_TRUE(drift->row.has_value());
    EXPECT_EQ(drift->row->queryHead, queryHead);  // layer indices, not the slice's
    EXPECT_EQ(drift->row->kvHead, 1);
    EXPECT_EQ(drift->row->queryIndex, queryIndex);
    EXPECT_EQ(drift->row->position, wholeRow->position);
    expectSameCase(drift->row->original, wholeRow->original, "original");
    expectSameCase(drift->row->keyOnly, wholeRow->keyOnly, "key_only");
    expectSameCase(drift->row->valueOnly, wholeRow->valueOnly, "value_only");
    expectSameCase(drift->row->joint, wholeRow->joint, "joint");

    const AttentionPositionSeries& s = drift->series;
    EXPECT_EQ(s.grouping, SeriesGrouping::KvHead);
    EXPECT_EQ(s.positions, wholeSeries->positions);
    ASSERT_EQ(s.kl.size(), 3u);
    for (size_t other : {size_t{0}, size_t{2}}) {
      EXPECT_TRUE(s.kl[other].empty());
      EXPECT_TRUE(s.relJoint[other].empty());
    }
    expectClose(s.kl[1], wholeSeries->kl[1], "kl");
    expectClose(s.relKeyOnly[1], wholeSeries->relKeyOnly[1], "key_only");
    expectClose(s.relValueOnly[1], wholeSeries->relValueOnly[1], "value_only");
    expectClose(s.relJoint[1], wholeSeries->relJoint[1], "joint");
  }
}

// The workspace keeps the slices of a layer and head; another head of the same layer (same
// owner) must be sliced afresh, not answered from the cached head.
TEST(ComputeDrift, CachedSlicesFollowTheKvHead) {
  const Layer l;
  auto owner = std::make_shared<int>(0);
  DriftWorkspace ws;
  for (int queryHead : {0, 5, 1}) {  // kv heads 0, 2, 0
    DriftInput in = inputOf(l, queryHead / 2, queryHead, 4);
    in.owner = owner;
    auto drift = computeDrift(in, ws);
    ASSERT_TRUE(drift.hasValue()) << drift.status().message();
    auto want = attentionRowDetail(l.whole(), queryHead, 4);
    ASSERT_TRUE(want.hasValue());
    expectSameCase(drift->row->joint, want->joint, "joint");
  }
  // Without the row the series still comes.
  DriftInput in = inputOf(l, 2, 4, 0);
  in.row = false;
  auto seriesOnly = computeDrift(in, ws);
  ASSERT_TRUE(seriesOnly.hasValue());
  EXPECT_FALSE(seriesOnly->row.has_value());
  EXPECT_FALSE(seriesOnly->series.kl[2].empty());
}

// A layer read head first holds only kv head 2 (firstHead 2 of 3, its two query heads): the row
// and the series must be the whole layer's for that head, with layer indices and 3 series lines;
// a query head of an unread kv head is an error naming it.
TEST(ComputeDrift, AHeadFirstReadGivesTheWholeLayersNumbers) {
  const Layer l;
  Tensor3 key, value, query, keyHat, valueHat;
  copyHeads(l.key, 2, 1, key);
  copyHeads(l.value, 2, 1, value);
  copyHeads(l.query, 4, 2, query);
  copyHeads(l.keyHat, 2, 1, keyHat);
  copyHeads(l.valueHat, 2, 1, valueHat);
  DriftInput in;
  in.key = &key;
  in.value = &value;
  in.query = &query;
  in.keyHat = &keyHat;
  in.valueHat = &valueHat;
  in.firstHead = 2;
  in.kvHeads = Layer::kvHeads;
  in.queryHead = 5;
  in.queryIndex = 3;
  in.softmaxScale = l.scale;
  DriftWorkspace ws;
  auto drift = computeDrift(in, ws);
  ASSERT_TRUE(drift.hasValue()) << drift.status().message();
  auto want = attentionRowDetail(l.whole(), 5, 3);
  ASSERT_TRUE(want.hasValue());
  EXPECT_EQ(drift->kvHead, 2);
  EXPECT_EQ(drift->row->queryHead, 5);
  EXPECT_EQ(drift->row->kvHead, 2);
  expectSameCase(drift->row->original, want->original, "original");
  expectSameCase(drift->row->joint, want->joint, "joint");
  auto wholeSeries = attentionPositionSeries(l.whole(), SeriesGrouping::KvHead);
  ASSERT_TRUE(wholeSeries.hasValue());
  ASSERT_EQ(drift->series.kl.size(), 3u);
  EXPECT_TRUE(drift->series.kl[0].empty());
  expectClose(drift->series.kl[2], wholeSeries->kl[2], "kl");
  expectClose(drift->series.relJoint[2], wholeSeries->relJoint[2], "joint");

  in.queryHead = 1;  // kv head 0: not read
  auto unread = computeDrift(in, ws);
  ASSERT_FALSE(unread.hasValue());
  EXPECT_NE(unread.status().message().find("kv head 0 is not read"), std::string::npos) << unread.status().message();
}

TEST(ComputeDrift, OutOfRangeInputsAreErrorsThatNameThem) {
  const Layer l;
  DriftWorkspace ws;
  DriftInput in = inputOf(l, 0, 6, 0);
  auto bad = computeDrift(in, ws);
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("query head 6"), std::string::npos) << bad.status().message();
  in.queryHead = 0;
  in.queryIndex = 5;
  bad = computeDrift(in, ws);
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("query row 5"), std::string::npos) << bad.status().message();
  in.queryIndex = 0;
  in.hatHead = 3;
  bad = computeDrift(in, ws);
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("kv head 3"), std::string::npos) << bad.status().message();
  in.hatHead = 0;
  in.keyHat = nullptr;
  EXPECT_FALSE(computeDrift(in, ws).hasValue());
}

// Issue 32 defect 10: the drift view's top keys are the k largest probabilities, largest first,
// the lower key first on ties.
TEST(TopIndices, TheKLargestLargestFirstLowerIndexOnTies) {
  const std::vector<double> p{0.1, 0.5, 0.2, 0.5, 0.05};
  EXPECT_EQ(topIndices(p, 3), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(topIndices(p, 10), (std::vector<int64_t>{1, 3, 2, 0, 4}));
  EXPECT_TRUE(topIndices(p, 0).empty());
  EXPECT_TRUE(topIndices({}, 5).empty());
}

}  // namespace
}  // namespace kvscope
