// SPDX-License-Identifier: GPL-3.0-or-later
// quantization.md §1 composed step by step on the whole tensor. Plain on purpose: each step is a
// loop over the tensor, in the contract's order, so that reading it checks the contract; the
// fast strategy (pipeline_fast.cpp) is held to its bits by tests/core/quant/pipeline/.
#include "core/quant/pipeline_reference.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include <omp.h>

#include "core/quant/finite_check.h"
#include "core/quant/formats.h"
#include "core/quant/rotation.h"

namespace kvscope {

namespace {
// Below this many elements threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;
}  // namespace

FormatInputEnd formatInputInto(const Tensor3& source, const QuantSpec& spec, int64_t firstHead, int64_t heads,
                               Tensor3& out, std::vector<Outlier>* setAside, const Progress& progress) {
  const int64_t d = source.dim;
  const QuantizedTokens range = quantizedTokens(spec, source.tokens);
  const int64_t count = range.count, n = count * d;
  out.heads = heads;
  out.tokens = count;
  out.dim = d;
  out.data.resize(static_cast<size_t>(heads * n));  // within the buffer's capacity when reused
  const int64_t k = outlierCount(spec.outliers, n);
  // Per head: step 2 (its quantized tokens, checked), step 3 (x·R per token), step 4 (its
  // outliers, zeroed). Heads run in parallel, in one loop (a barrier per batch of heads costs a
  // whole head's work when another process holds a core); the calling thread (OpenMP thread 0)
  // reports before each head it takes, and every thread stops at its next head after a cancel.
  std::vector<std::vector<Outlier>> outliers(static_cast<size_t>(heads));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  int bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad) if (heads * n > kParallelThreshold)
  for (int64_t h = 0; h < heads; ++h) {
    if (stop.load(std::memory_order_relaxed)) continue;
    const double fraction = 0.5 * static_cast<double>(done.load()) / static_cast<double>(heads);
    if (omp_get_thread_num() == 0 && !report(progress, fraction, "outliers")) {
      stop = true;
      continue;
    }
    float* x = out.data.data() + h * n;
    if (copyAndCheck(source.row(firstHead + h, range.first), x, n)) {
      bad = 1;
      stop = true;
      continue;
    }
    rotateRows(spec, x, count, d);
    if (k > 0) {
      static thread_local std::vector<int64_t> picked;
      selectOutliersByIndexInto(x, n, k, picked);
      std::vector<Outlier>& mine = outliers[static_cast<size_t>(h)];
      for (int64_t i : picked) {
        mine.push_back({static_cast<size_t>(h * n + i), x[i]});
        x[i] = 0.0f;
      }
    }
    done.fetch_add(1, std::memory_order_relaxed);
  }
  if (bad != 0) return FormatInputEnd::NonFinite;
  if (stop) return FormatInputEnd::Cancelled;
  if (setAside != nullptr) {
    for (const auto& head : outliers) setAside->insert(setAside->end(), head.begin(), head.end());
  }
  return FormatInputEnd::Done;
}

Status quantizeReference(const Tensor3& tensor, const Tensor3* preRope, const RopeParams& rope, const QuantSpec& spec,
                         Tensor3& recon, const Progress& progress, bool& nonFinite) {
  // Step 1: a prerope spec works on the keys before RoPE.
  const Tensor3& x = spec.prerope ? *preRope : tensor;
  const int64_t kvh = x.heads, tokens = x.tokens, d = x.dim;
  const QuantizedTokens range = quantizedTokens(spec, tokens);
  const int64_t first = range.first, count = range.count;
  recon.heads = kvh;
  recon.tokens = tokens;
  recon.dim = d;
  nonFinite = false;
  if (count == 0 || formatInfo(spec.format).exact) {
    recon.data.resize(x.size());
    nonFinite = copyTensorAndCheck(x, recon);
  } else {
    // Steps 2–4, into recon's own buffer (a fresh layer-sized one costs more in page faults than
    // the quantization): the format's input, [kvh, count, D], with the outliers set aside.
    Tensor3 q;
    q.data = std::move(recon.data);
    std::vector<Outlier> outliers;
    const FormatInputEnd end = formatInputInto(x, spec, 0, kvh, q, &outliers, progress);
    Status st = end == FormatInputEnd::Cancelled ? Status::cancelled() : Status::ok();
    nonFinite = end == FormatInputEnd::NonFinite;
    // Step 5: the format.
    if (end == FormatInputEnd::Done && !report(progress, 0.5, "quantizing")) st = Status::cancelled();
    if (end == FormatInputEnd::Done && st.isOk()) {
      st = quantizeFormatInPlace(q, spec).withContext("spec '" + toString(spec) + "'");
    }
    if (end == FormatInputEnd::Done && st.isOk() && !report(progress, 0.9, "reconstructing")) st = Status::cancelled();
    recon.data = std::move(q.data);
    if (nonFinite || !st.isOk()) return st;
    // Step 6: restore the outliers, rotate back (x·Rᵀ), put the quantized tokens in their place
    // (moving right, last head first: a head's target never lies below a later head's source)
    // and the kept tokens around them.
    for (const Outlier& o : outliers) recon.data[o.index] = o.value;
#pragma omp parallel for schedule(dynamic, 1) if (rotates(spec) && kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) unrotateRows(spec, recon.data.data() + h * count * d, count, d);
    recon.data.resize(x.size());  // within capacity: no allocation
    const int64_t kept = tokens - count;
    for (int64_t h = kvh - 1; h >= 0 && kept > 0; --h) {
      std::memmove(recon.row(h, first), recon.data.data() + h * count * d,
                   static_cast<size_t>(count * d) * sizeof(float));
    }
    for (int64_t h = 0; h < kvh && kept > 0; ++h) {
      nonFinite |= copyAndCheck(x.row(h, 0), recon.row(h, 0), first * d);
      nonFinite |= copyAndCheck(x.row(h, first + count), recon.row(h, first + count), (tokens - first - count) * d);
    }
    if (nonFinite) return Status::ok();
  }
  // Step 1's end: RoPE on the reconstruction of pre-RoPE keys.
  if (!nonFinite && spec.prerope) applyRope(recon, rope);
  return Status::ok();
}

}  // namespace kvscope
