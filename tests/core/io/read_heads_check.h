// SPDX-License-Identifier: GPL-3.0-or-later
// The check every read test applies to Dump::readHeads: each head range of a tensor reads exactly
// that slice of Dump::read's tensor, through readHeads and through readHeadsInto.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/io/dump.h"

namespace kvscope::test {

/// Every range [first, first + count) of the heads of `kind` in (layer, sequence) against the
/// slice of the whole read; readHeadsInto must write exactly count × tokens × dim floats.
inline void expectHeadRangesMatchRead(const Dump& dump, int layer, TensorKind kind, int sequence = 0) {
  auto whole = dump.read(layer, kind, sequence);
  ASSERT_TRUE(whole) << whole.status().message();
  const int64_t perHead = whole->tokens * whole->dim;
  for (int64_t first = 0; first < whole->heads; ++first)
    for (int64_t count = 1; first + count <= whole->heads; ++count) {
      const std::string where = std::string(tensorKindName(kind)) + " layer " + std::to_string(layer) + " sequence " +
                                std::to_string(sequence) + " heads " + std::to_string(first) + "+" +
                                std::to_string(count);
      auto part = dump.readHeads(layer, kind, first, count, sequence);
      ASSERT_TRUE(part) << where << ": " << part.status().message();
      ASSERT_EQ(part->heads, count) << where;
      ASSERT_EQ(part->tokens, whole->tokens) << where;
      ASSERT_EQ(part->dim, whole->dim) << where;
      const std::vector<float> expected(whole->data.begin() + first * perHead,
                                        whole->data.begin() + (first + count) * perHead);
      ASSERT_EQ(part->data, expected) << where;
      std::vector<float> buffer(static_cast<size_t>(count * perHead + 1), -1234.5f);
      auto shape = dump.readHeadsInto(layer, kind, first, count, sequence, buffer.data(), count * perHead);
      ASSERT_TRUE(shape) << where << ": " << shape.status().message();
      EXPECT_EQ((*shape)[0], count) << where;
      EXPECT_EQ(buffer.back(), -1234.5f) << where << ": wrote past the range";
      buffer.pop_back();
      ASSERT_EQ(buffer, expected) << where;
    }
}

}  // namespace kvscope::test
