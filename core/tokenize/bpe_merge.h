// SPDX-License-Identifier: GPL-3.0-or-later
// The BPE merge loop both engines run (llama.cpp's llm_tokenizer_bpe_session::tokenize,
// Hugging Face's Word::merge_all in tokenizers/src/models/bpe/word.rs): repeatedly merge the
// adjacent pair with the lowest merge rank, the leftmost one among equal ranks, until no pair of
// the word has a merge. Symbols are token ids; merges are keyed by the pair of ids in a hash map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvscope::tok {

/// One merge: its rank (position in the merges list) and the id of the merged token.
struct MergeRule {
  int rank = 0;
  int result = 0;
};

/// Merges keyed by the pair of token ids.
class MergeTable {
 public:
  /// Adds left+right → result at `rank`. A pair seen before keeps its first rule when
  /// `keepFirst` (llama.cpp's emplace), else takes the new one (Hugging Face's map collect).
  void add(int left, int right, int rank, int result, bool keepFirst);
  /// The rule for the pair, or nullptr.
  [[nodiscard]] const MergeRule* find(int left, int right) const {
    auto it = map_.find(key(left, right));
    return it == map_.end() ? nullptr : &it->second;
  }
  /// Number of distinct pairs.
  [[nodiscard]] size_t size() const { return map_.size(); }
  void reserve(size_t n) { map_.reserve(n); }

 private:
  static uint64_t key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, MergeRule> map_;
};

/// Applies the merges to `symbols` in place. A negative id is a symbol outside the vocabulary:
/// no merge involves it and it stays as it is.
void applyMerges(std::vector<int>& symbols, const MergeTable& merges);

}  // namespace kvscope::tok
