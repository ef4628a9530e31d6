// SPDX-License-Identifier: GPL-3.0-or-later
// An independent float64 Llama forward pass, written plainly from the equations (not from
// core/model), used to check the float32 implementation and the recorded dumps.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kvscope::test {

class ReferenceModel {
 public:
  int dim = 0, hidden = 0, layers = 0, heads = 0, kvHeads = 0, vocab = 0, seqLen = 0;
  bool shared = true;

  /// Reads the whole checkpoint with plain file reads; false on any problem.
  bool load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    int32_t h[7];
    if (!in.read(reinterpret_cast<char*>(h), sizeof(h))) return false;
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kvHeads = h[4], vocab = std::abs(h[5]),
    seqLen = h[6];
    shared = h[5] > 0;
    std::vector<float> f;
    float v;
    while (in.read(reinterpret_cast<char*>(&v), sizeof(v))) f.push_back(v);
    size_t at = 0;
    auto take = [&](size_t n) {
      std::vector<double> out(f.begin() + static_cast<ptrdiff_t>(at), f.begin() + static_cast<ptrdiff_t>(at + n));
      at += n;
      return out;
    };
    const size_t D = static_cast<size_t>(dim / heads), kvd = static_cast<size_t>(kvHeads) * D;
    const size_t d = static_cast<size_t>(dim), hd = static_cast<size_t>(hidden), L = static_cast<size_t>(layers);
    emb = take(static_cast<size_t>(vocab) * d);
    rmsAtt = take(L * d);
    wq = take(L * d * d);
    wk = take(L * d * kvd);
    wv = take(L * d * kvd);
    wo = take(L * d * d);
    rmsFfn = take(L * d);
    w1 = take(L * d * hd);
    w2 = take(L * hd * d);
    w3 = take(L * d * hd);
    rmsFinal = take(d);
    take(static_cast<size_t>(seqLen) * D);
    cls = shared ? emb : take(static_cast<size_t>(vocab) * d);
    kCache.assign(L, {});
    vCache.assign(L, {});
    return at == f.size();
  }

  /// Logits for `token` at the next position; also keeps the pre-RoPE/post-RoPE keys, values and queries.
  std::vector<double> step(int token) {
    const int D = dim / heads, kvd = kvHeads * D, pos = static_cast<int>(kCache[0].size()) / kvd;
    std::vector<double> x(emb.begin() + static_cast<ptrdiff_t>(token) * dim,
                          emb.begin() + static_cast<ptrdiff_t>(token + 1) * dim);
    lastQuery.assign(static_cast<size_t>(layers), {});
    lastKeyPreRope.assign(static_cast<size_t>(layers), {});
    for (int l = 0; l < layers; ++l) {
      std::vector<double> xb = rms(x, rmsAtt, static_cast<size_t>(l) * dim);
      std::vector<double> q = mat(wq, static_cast<size_t>(l) * dim * dim, xb, dim, dim);
      std::vector<double> k = mat(wk, static_cast<size_t>(l) * dim * kvd, xb, kvd, dim);
      std::vector<double> v = mat(wv, static_cast<size_t>(l) * dim * kvd, xb, kvd, dim);
      lastKeyPreRope[static_cast<size_t>(l)] = k;
      rope(q, pos, D);
      rope(k, pos, D);
      lastQuery[static_cast<size_t>(l)] = q;
      auto& kc = kCache[static_cast<size_t>(l)];
      auto& vc = vCache[static_cast<size_t>(l)];
      kc.insert(kc.end(), k.begin(), k.end());
      vc.insert(vc.end(), v.begin(), v.end());
      std::vector<double> att(static_cast<size_t>(dim), 0.0);
      for (int h = 0; h < heads; ++h) {
        const int g = h / (heads / kvHeads);
        std::vector<double> s(static_cast<size_t>(pos + 1));
        double mx = -1e300;
        for (int t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int i = 0; i < D; ++i) dot += q[static_cast<size_t>(h * D + i)] * kc[static_cast<size_t>(t * kvd + g * D + i)];
          s[static_cast<size_t>(t)] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[static_cast<size_t>(t)]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int t = 0; t <= pos; ++t)
          for (int i = 0; i < D; ++i)
            att[static_cast<size_t>(h * D + i)] += s[static_cast<size_t>(t)] / sum * vc[static_cast<size_t>(t * kvd + g * D + i)];
      }
      std::vector<double> o = mat(wo, static_cast<size_t>(l) * dim * dim, att, dim, dim);
      for (int i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      xb = rms(x, rmsFfn, static_cast<size_t>(l) * dim);
      std::vector<double> a = mat(w1, static_cast<size_t>(l) * dim * hidden, xb, hidden, dim);
      std::vector<double> b = mat(w3, static_cast<size_t>(l) * dim * hidden, xb, hidden, dim);
      for (int i = 0; i < hidden; ++i) {
        const double z = a[static_cast<size_t>(i)];
        a[static_cast<size_t>(i)] = z / (1 + std::exp(-z)) * b[static_cast<size_t>(i)];
      }
      std::vector<double> f = mat(w2, static_cast<size_t>(l) * hidden * dim, a, dim, hidden);
      for (int i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += f[static_cast<size_t>(i)];
    }
    return mat(cls, 0, rms(x, rmsFinal, 0), vocab, dim);
  }

  std::vector<std::vector<double>> kCache, vCache;  ///< per layer, [t][kvHeads*D] flattened (post-RoPE keys)
  std::vector<std::vector<double>> lastQuery, lastKeyPreRope;

  /// RoPE on interleaved pairs per head: pair i of each head turns by pos * 10000^(-2i/D).
  static void rope(std::vector<double>& x, int pos, int D) {
    for (size_t base = 0; base < x.size(); base += static_cast<size_t>(D)) {
      for (int i = 0; i < D / 2; ++i) {
        const double a = pos * std::pow(10000.0, -2.0 * i / D);
        const double x0 = x[base + 2 * static_cast<size_t>(i)], x1 = x[base + 2 * static_cast<size_t>(i) + 1];
        x[base + 2 * static_cast<size_t>(i)] = x0 * std::cos(a) - x1 * std::sin(a);
        x[base + 2 * static_cast<size_t>(i) + 1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
    }
  }

 private:
  std::vector<double> emb, rmsAtt, wq, wk, wv, wo, rmsFfn, w1, w2, w3, rmsFinal, cls;

  static std::vector<double> mat(const std::vector<double>& w, size_t off, const std::vector<double>& x, int rows, int cols) {
    std::vector<double> out(static_cast<size_t>(rows), 0.0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) out[static_cast<size_t>(r)] += w[off + static_cast<size_t>(r) * cols + c] * x[static_cast<size_t>(c)];
    return out;
  }
  static std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& w, size_t off) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = w[off + i] * x[i] * inv;
    return out;
  }
};

}  // namespace kvscope::test
