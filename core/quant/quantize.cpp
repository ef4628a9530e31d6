// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline of quantization.md §1 around the formats (step 5 lives in formats.cpp), and the
// storage accounting of §5.
#include "core/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"

namespace kvscope {

namespace {

bool isPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/// Rotates each (first, second) channel pair of every token by ±angle(position, pair).
void rotatePairs(Tensor3& x, const RopeParams& rope, int64_t positionOffset, double sign) {
  const int64_t d = x.dim;
  const int64_t pairs = d / 2;
  if (pairs == 0) return;
  // Frequencies and angles in double: float angles at position 32k lose whole radians of phase.
  std::vector<double> freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    freq[static_cast<size_t>(i)] =
        std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  }
  const bool interleaved = rope.style == RopeStyle::Interleaved;
#pragma omp parallel for schedule(static) if (x.tokens * d > 65536)
  for (int64_t t = 0; t < x.tokens; ++t) {
    std::vector<double> c(static_cast<size_t>(pairs)), s(static_cast<size_t>(pairs));
    const double pos = static_cast<double>(t + positionOffset);
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = sign * pos * freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(i)] = std::cos(angle);
      s[static_cast<size_t>(i)] = std::sin(angle);
    }
    for (int64_t h = 0; h < x.heads; ++h) {
      float* row = x.row(h, t);
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t a = interleaved ? 2 * i : i;
        const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
        const double x0 = row[a], x1 = row[b];
        const double ci = c[static_cast<size_t>(i)], si = s[static_cast<size_t>(i)];
        row[a] = static_cast<float>(x0 * ci - x1 * si);
        row[b] = static_cast<float>(x0 * si + x1 * ci);
      }
    }
  }
}

/// First non-finite element of `x`, as a message; empty when all are finite.
std::string firstNonFinite(const Tensor3& x) {
  for (int64_t h = 0; h < x.heads; ++h) {
    for (int64_t t = 0; t < x.tokens; ++t) {
      const float* row = x.row(h, t);
      for (int64_t c = 0; c < x.dim; ++c) {
        if (!std::isfinite(row[c])) {
          return "non-finite value at head " + std::to_string(h) + ", token " + std::to_string(t) +
                 ", channel " + std::to_string(c);
        }
      }
    }
  }
  return {};
}

struct Outlier {
  size_t index;  ///< flat index into the quantized tensor
  float value;
};

/// Dense-and-sparse split of one kv head: zeroes its `count` outliers in `x` and appends them
/// to `out`.
void extractOutliers(Tensor3& x, int64_t head, int64_t count, std::vector<Outlier>& out) {
  const size_t base = x.index(head, 0, 0);
  for (int64_t i : selectOutliers(x.data.data() + base, x.tokens * x.dim, count)) {
    const size_t idx = base + static_cast<size_t>(i);
    out.push_back({idx, x.data[idx]});
    x.data[idx] = 0.0f;
  }
}

}  // namespace

int64_t outlierCount(double fraction, int64_t n) {
  if (fraction <= 0 || n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n)));
  return std::min(k, n);
}

std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count) {
  count = std::min(count, n);
  if (count <= 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // A strict total order (|x| descending, then index ascending) makes the choice deterministic.
  auto before = [values](int64_t a, int64_t b) {
    const float fa = std::fabs(values[a]), fb = std::fabs(values[b]);
    return fa != fb ? fa > fb : a < b;
  };
  if (count < n) std::nth_element(order.begin(), order.begin() + (count - 1), order.end(), before);
  order.resize(static_cast<size_t>(count));
  std::sort(order.begin(), order.end(), before);
  return order;
}

void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, +1.0);
}

void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, -1.0);
}

void hadamardInPlace(Tensor3& x) {
  const int64_t d = x.dim;
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  const double norm = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t rows = x.heads * x.tokens;
#pragma omp parallel for schedule(static) if (rows * d > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    // Fast Walsh–Hadamard transform in double; Sylvester order, so the result is x·H.
    std::vector<double> buf(static_cast<size_t>(d));
    float* row = x.data.data() + r * d;
    for (int64_t i = 0; i < d; ++i) buf[static_cast<size_t>(i)] = row[i];
    for (int64_t len = 1; len < d; len <<= 1) {
      for (int64_t i = 0; i < d; i += 2 * len) {
        for (int64_t j = i; j < i + len; ++j) {
          const double a = buf[static_cast<size_t>(j)], b = buf[static_cast<size_t>(j + len)];
          buf[static_cast<size_t>(j)] = a + b;
          buf[static_cast<size_t>(j + len)] = a - b;
        }
      }
    }
    for (int64_t i = 0; i < d; ++i) row[i] = static_cast<float>(buf[static_cast<size_t>(i)] * norm);
  }
}

StorageCount storageFor(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  StorageCount s;
  s.elements = kvHeads * tokens * headDim;
  const int64_t kept = std::min<int64_t>(int64_t{spec.sinks} + spec.residual, tokens);
  const int64_t quantTokens = tokens - kept;
  const int64_t quantized = kvHeads * quantTokens * headDim;
  s.keptBits = 16.0 * static_cast<double>(kvHeads * kept * headDim);
  s.outlierBits = 48.0 * static_cast<double>(kvHeads * outlierCount(spec.outliers, quantTokens * headDim));
  if (quantized == 0) return s;

  const FormatInfo& info = formatInfo(spec.format);
  const double payload = info.hasBits ? spec.bits : info.payloadBits;
  s.payloadBits = payload * static_cast<double>(quantized);
  const auto groups = static_cast<double>(groupCount(spec, kvHeads, quantTokens, headDim));
  switch (info.kind) {
    case FormatKind::Integer:
    case FormatKind::Float8:
    case FormatKind::Codebook: {
      if (spec.unitscale) break;
      const double valueBits = spec.scale == MetaType::Fp32 ? 32.0 : 16.0;
      const double perGroup = (info.kind == FormatKind::Integer && !spec.symmetric) ? 2.0 : 1.0;
      s.metadataBits = groups * perGroup * valueBits;
      break;
    }
    case FormatKind::Block:
      s.metadataBits = groups * info.blockMetaBits + info.tensorMetaBits;
      break;
    case FormatKind::Elementwise:
      break;
  }
  return s;
}

Expected<QuantOutput> quantizeTensor(const QuantInput& input, const QuantSpec& spec,
                                     const Progress& progress) {
  if (input.tensor == nullptr) return Status::internal("quantizeTensor: no input tensor");
  const Tensor3& reference = *input.tensor;
  const std::string specText = toString(spec);

  // Step 1: pre-RoPE keys are quantized before rotation by position.
  const Tensor3* source = &reference;
  if (spec.prerope) {
    if (input.preRope == nullptr) {
      return Status::invalidArgument("spec '" + specText + "': prerope needs key_pre_rope, which was not given");
    }
    if (!input.preRope->sameShape(reference)) {
      return Status::invalidData("key_pre_rope's shape differs from key's");
    }
    source = input.preRope;
  }
  if (spec.hadamard && !isPowerOfTwo(source->dim)) {
    return Status::invalidArgument("spec '" + specText + "': rot=hadamard needs a head dim that is a power of two, but D = " +
                                   std::to_string(source->dim));
  }
  if (std::string where = firstNonFinite(*source); !where.empty()) {
    return Status::invalidData(std::string(spec.prerope ? "key_pre_rope" : "input") + ": " + where +
                               " (quantization needs finite values)");
  }

  QuantOutput out;
  out.storage = storageFor(spec, source->heads, source->tokens, source->dim);
  out.reconstruction = *source;  // kept tokens are copied exactly from here
  Tensor3& recon = out.reconstruction;

  // Step 2: only tokens [S, T-R) are quantized.
  const int64_t kvh = source->heads, tokens = source->tokens, d = source->dim;
  const int64_t kept = std::min<int64_t>(int64_t{spec.sinks} + spec.residual, tokens);
  const int64_t first = std::min<int64_t>(spec.sinks, tokens);
  const int64_t count = tokens - kept;

  if (count > 0 && spec.format != FormatId::None) {
    Tensor3 q(kvh, count, d);
    for (int64_t h = 0; h < kvh; ++h) {
      std::copy_n(source->row(h, first), static_cast<size_t>(count * d), q.row(h, 0));
    }
    // Step 3: rotation.
    if (spec.hadamard) hadamardInPlace(q);
    // Step 4: dense-and-sparse outliers, per kv head.
    std::vector<Outlier> outliers;
    const int64_t perHead = outlierCount(spec.outliers, count * d);
    outliers.reserve(static_cast<size_t>(perHead * kvh));
    for (int64_t h = 0; h < kvh; ++h) {
      if (!report(progress, 0.5 * static_cast<double>(h) / static_cast<double>(kvh), "outliers")) {
        return Status::cancelled();
      }
      extractOutliers(q, h, perHead, outliers);
    }
    if (!report(progress, 0.5, "quantizing")) return Status::cancelled();
    // Step 5: the format.
    KVS_RETURN_IF_ERROR(quantizeFormatInPlace(q, spec).withContext("spec '" + specText + "'"));
    if (!report(progress, 0.9, "reconstructing")) return Status::cancelled();
    // Step 6: restore outliers, rotate back, insert between the kept tokens.
    for (const Outlier& o : outliers) q.data[o.index] = o.value;
    if (spec.hadamard) hadamardInPlace(q);  // H is symmetric and orthogonal: H·H = I
    for (int64_t h = 0; h < kvh; ++h) {
      std::copy_n(q.row(h, 0), static_cast<size_t>(count * d), recon.row(h, first));
    }
  }
  if (spec.prerope) applyRope(recon, input.rope);
  if (!report(progress, 1.0, "done")) return Status::cancelled();
  return out;
}

}  // namespace kvscope
