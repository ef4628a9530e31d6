// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/tokenize/bpe_merge.h"

#include <algorithm>
#include <queue>

namespace kvscope::tok {

void MergeTable::add(int left, int right, int rank, int result, bool keepFirst) {
  auto [it, inserted] = map_.try_emplace(key(left, right), MergeRule{rank, result});
  if (!inserted && !keepFirst) it->second = MergeRule{rank, result};
}

void applyMerges(std::vector<int>& symbols, const MergeTable& merges) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  struct Candidate {
    int rank;
    int pos;    // index of the left symbol
    int left;   // the ids the pair had when queued: a later merge of either makes it stale
    int right;
    int result;
  };
  // Lowest rank first; among equal ranks the leftmost (both engines' comparators).
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<size_t>(i)] = i - 1;
  }
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int a = symbols[static_cast<size_t>(left)], b = symbols[static_cast<size_t>(right)];
    if (a < 0 || b < 0) return;
    if (const MergeRule* r = merges.find(a, b)) queue.push({r->rank, left, a, b, r->result});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> gone(static_cast<size_t>(n), false);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const auto p = static_cast<size_t>(c.pos);
    if (gone[p] || symbols[p] != c.left) continue;
    const int right = next[p];
    if (right < 0 || symbols[static_cast<size_t>(right)] != c.right) continue;
    symbols[p] = c.result;
    gone[static_cast<size_t>(right)] = true;
    next[p] = next[static_cast<size_t>(right)];
    if (next[p] >= 0) prev[static_cast<size_t>(next[p])] = c.pos;
    consider(prev[p]);
    consider(c.pos);
  }
  size_t out = 0;
  for (size_t i = 0; i < symbols.size(); ++i)
    if (!gone[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

}  // namespace kvscope::tok
