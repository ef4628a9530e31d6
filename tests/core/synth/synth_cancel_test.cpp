// SPDX-License-Identifier: GPL-3.0-or-later
// Reliability finding 3: Ctrl-C during synth should not wait for a whole layer to be generated
// and written. Generation asks every 64 tokens, the writer before every ~1 MiB block.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

SynthOptions oneLongHead() {
  SynthOptions o;
  o.layers = 2;
  o.kvHeads = 1;
  o.heads = 1;
  o.tokens = 4096;
  o.queries = 1;
  o.headDim = 16;
  return o;
}

TEST(SynthCancel, StopsInsideALayersGenerationBeforeWritingIt) {
  test::TempDir dir;
  std::vector<std::string> asked;
  // Call 1 is the layer's start, call 2 the generation's first check (token 0), call 3 the next
  // (token 64): refusing it must stop before any of the layer is written.
  const Status st = writeSynthDump(dir.file("s.h5"), oneLongHead(),
                                   [&](double, std::string_view what) {
                                     asked.emplace_back(what);
                                     return asked.size() < 3;
                                   });
  EXPECT_EQ(st.code(), StatusCode::Cancelled) << st.message();
  EXPECT_EQ(asked, (std::vector<std::string>(3, "generating layers")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SynthCancel, StopsBetweenTheWritersBlocks) {
  test::TempDir dir;
  int writing = 0;
  const Status st = writeSynthDump(dir.file("s.h5"), oneLongHead(),
                                   [&](double, std::string_view what) {
                                     if (what == "writing layers") ++writing;
                                     return writing < 2;
                                   });
  EXPECT_EQ(st.code(), StatusCode::Cancelled) << st.message();
  // 4096 tokens × 16 channels in fp16 is one block per tensor: key_pre_rope, the first
  // layer's second write, was refused before its first block.
  EXPECT_EQ(writing, 2);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace kvscope
