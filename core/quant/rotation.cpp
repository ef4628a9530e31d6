// SPDX-License-Identifier: GPL-3.0-or-later
// The rotations of §1 step 3. The Hadamard kinds run the float32 fast Walsh–Hadamard transform
// of core/quant/hadamard.cpp (docs/spec-strings.md, "rot=hadamard"); rot=random multiplies by
// the seeded orthogonal matrix rounded to float.
#include "core/quant/rotation.h"

#include <Eigen/Dense>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/quant/hadamard.h"
#include "core/quant/rng.h"

namespace kvscope {
namespace {

using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// G = Q·U (QR), R = Q·diag(sign(diag(U))), with sign(0) = +1.
RowMatD randomOrthogonal(uint64_t seed, int64_t d) {
  const std::vector<double> draws = normalMatrix(seed, d, d);
  const RowMatD g = Eigen::Map<const RowMatD>(draws.data(), d, d);
  Eigen::HouseholderQR<RowMatD> qr(g);
  RowMatD q = qr.householderQ() * RowMatD::Identity(d, d);
  const RowMatD& u = qr.matrixQR();  // U is its upper triangle
  for (int64_t c = 0; c < d; ++c) {
    if (u(c, c) < 0) q.col(c) *= -1.0;
  }
  return q;
}

/// The float copy of rot=random's matrix and its transpose, built once per (seed, d).
struct RandomRotation {
  RowMatF r, rt;
};
const RandomRotation& cachedRandom(uint64_t seed, int64_t d) {
  static std::mutex mutex;
  static std::map<std::pair<uint64_t, int64_t>, std::unique_ptr<RandomRotation>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[{seed, d}];
  if (!slot) {
    slot = std::make_unique<RandomRotation>();
    slot->r = randomOrthogonal(seed, d).cast<float>();
    slot->rt = slot->r.transpose();
  }
  return *slot;
}

const std::vector<float>& cachedSigns(uint64_t seed, int64_t d) {
  static std::mutex mutex;
  static std::map<std::pair<uint64_t, int64_t>, std::vector<float>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[{seed, d}];
  if (slot.empty()) slot = rhtSigns(seed, d);
  return slot;
}

void multiplySigns(float* x, int64_t rows, int64_t d, const std::vector<float>& sigma) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (int64_t k = 0; k < d; ++k) row[k] *= sigma[static_cast<size_t>(k)];
  }
}

void multiplyMatrix(float* x, int64_t rows, int64_t d, const RowMatF& m) {
  Eigen::Map<RowMatF> xs(x, rows, d);
  // Row blocks keep the temporary small.
  constexpr int64_t kBlock = 256;
  RowMatF tmp;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t n = std::min(kBlock, rows - r0);
    tmp.noalias() = xs.middleRows(r0, n) * m;
    xs.middleRows(r0, n) = tmp;
  }
}

/// Whole-D or blocked Hadamard: a row of d values is d/N rows of N.
void hadamardBlocks(const QuantSpec& spec, float* x, int64_t rows, int64_t d) {
  const int64_t n = spec.rotationBlock > 0 ? spec.rotationBlock : d;
  hadamardTransformRows(x, rows * (d / n), n);
}

}  // namespace

std::vector<float> rhtSigns(uint64_t seed, int64_t d) {
  SplitMix64 gen(seed);
  std::vector<float> sigma(static_cast<size_t>(d));
  for (float& s : sigma) s = (gen.next() >> 63) == 0 ? 1.0f : -1.0f;
  return sigma;
}

void rotateRows(const QuantSpec& spec, float* x, int64_t rows, int64_t d) {
  switch (effectiveRotation(spec, d)) {
    case Rotation::None: return;
    case Rotation::Hadamard: hadamardBlocks(spec, x, rows, d); return;
    case Rotation::Rht:  // x·diag(σ)·H
      multiplySigns(x, rows, d, cachedSigns(spec.seed, d));
      hadamardTransformRows(x, rows, d);
      return;
    case Rotation::Random: multiplyMatrix(x, rows, d, cachedRandom(spec.seed, d).r); return;
  }
}

void unrotateRows(const QuantSpec& spec, float* x, int64_t rows, int64_t d) {
  switch (effectiveRotation(spec, d)) {
    case Rotation::None: return;
    case Rotation::Hadamard: hadamardBlocks(spec, x, rows, d); return;  // H is symmetric: H·H = I
    case Rotation::Rht:  // x·Hᵀ·diag(σ)
      hadamardTransformRows(x, rows, d);
      multiplySigns(x, rows, d, cachedSigns(spec.seed, d));
      return;
    case Rotation::Random: multiplyMatrix(x, rows, d, cachedRandom(spec.seed, d).rt); return;
  }
}

std::vector<double> rotationMatrix(const QuantSpec& spec, int64_t d) {
  RowMatD r = RowMatD::Identity(d, d);
  auto sylvester = [](int64_t n) {
    RowMatD h = RowMatD::Ones(1, 1);
    while (h.rows() < n) {
      const int64_t m = h.rows();
      RowMatD next(2 * m, 2 * m);
      next << h, h, h, -h;
      h = next;
    }
    return RowMatD(h / std::sqrt(static_cast<double>(n)));
  };
  switch (effectiveRotation(spec, d)) {
    case Rotation::None: break;
    case Rotation::Hadamard: {
      const int64_t n = spec.rotationBlock > 0 ? spec.rotationBlock : d;
      const RowMatD h = sylvester(n);
      r.setZero();
      for (int64_t b = 0; b < d; b += n) r.block(b, b, n, n) = h;
      break;
    }
    case Rotation::Rht: {
      const std::vector<float> sigma = rhtSigns(spec.seed, d);
      r = sylvester(d);
      for (int64_t k = 0; k < d; ++k) r.row(k) *= static_cast<double>(sigma[static_cast<size_t>(k)]);
      break;
    }
    case Rotation::Random: r = randomOrthogonal(spec.seed, d); break;
  }
  return {r.data(), r.data() + d * d};
}

double rotationCost(const QuantSpec& spec, int64_t d) {
  const auto dd = static_cast<double>(d);
  switch (effectiveRotation(spec, d)) {
    case Rotation::None: return 0.0;
    case Rotation::Hadamard:
      return dd * std::log2(static_cast<double>(spec.rotationBlock > 0 ? spec.rotationBlock : d));
    case Rotation::Rht: return dd * std::log2(dd) + dd;
    case Rotation::Random: return dd * dd;
  }
  return 0.0;
}

}  // namespace kvscope
