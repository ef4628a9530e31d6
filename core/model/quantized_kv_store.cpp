// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/quantized_kv_store.h"

#include <algorithm>
#include <cstring>

#include "core/quant/format_table.h"
#include "core/quant/rope.h"

namespace kvscope {

const char* streamingModeName(StreamingMode mode) {
  switch (mode) {
    case StreamingMode::Exact: return "exact";
    case StreamingMode::TokenLocal: return "token-local";
    case StreamingMode::ChannelGroups: return "channel-groups";
    case StreamingMode::Calibrated: return "calibrated";
  }
  return "?";
}

StreamingMode streamingModeFor(const QuantSpec& spec) { return formatInfo(spec.format).streaming(spec); }

std::string streamingDescription(const QuantSpec& spec) {
  std::string kept;
  if (spec.sinks > 0) kept += "; the first " + std::to_string(spec.sinks) + " tokens stay exact";
  if (spec.residual > 0)
    kept += "; the " + std::to_string(spec.residual) + " newest tokens stay exact and a token is quantized "
            "when it leaves that window";
  if (spec.chunk > 0)
    kept += "; tokens enter the quantized store " + std::to_string(spec.chunk) +
            " at a time (a chunk is quantized when it fills; the newest, unfilled chunk stays exact)";
  switch (streamingModeFor(spec)) {
    case StreamingMode::Exact:
      return "stored exactly";
    case StreamingMode::TokenLocal:
      return "each token quantized on arrival" + kept;
    case StreamingMode::ChannelGroups:
      return "channel groups of " + std::to_string(spec.group) +
             " tokens quantized once complete, the incomplete tail kept exact" + kept;
    case StreamingMode::Calibrated:
      // What is calibrated, in the row's words (hqq's groups, nuq's codebook), or the scales.
      if (const std::string_view note = formatInfo(spec.format).calibratedNote; !note.empty()) {
        return std::string(note) + kept;
      }
      return "scales calibrated on the dump's whole cache (no streaming engine knows them in advance): each "
             "token is quantized on arrival with the scales of the dump's tensor in which its row is replaced "
             "by the replay's" + kept;
  }
  return {};
}

QuantizedCacheStore::QuantizedCacheStore(int kvHeads, int headDim, std::vector<QuantSpec> key,
                                         std::vector<QuantSpec> value, RopeParams rope,
                                         CalibrationSource calibration, std::vector<std::string> querySpec)
    : kvHeads_(kvHeads),
      headDim_(headDim),
      key_(std::move(key)),
      value_(std::move(value)),
      rope_(std::move(rope)),
      calibration_(std::move(calibration)),
      querySpec_(std::move(querySpec)) {}

namespace {

/// The first position at which a quantized row (or group) is held, from the spec's windows. The
/// engine's view at step p: tokens [sinks, end(p)) have left the residual window or belong to a
/// filled chunk (end(p) = sinks + ⌊(p+1−sinks)/C⌋·C with chunk=C, else p+1−R).
int firstHeld(const QuantSpec& spec, int quantizedEnd) {
  // The smallest p with end(p) ≥ quantizedEnd.
  const int first = spec.sinks;
  if (spec.chunk > 0) {
    const int need = quantizedEnd - first;                   // rows past the sinks that must be in filled chunks
    const int chunks = (need + spec.chunk - 1) / spec.chunk;  // ⌈need / C⌉
    return first + chunks * spec.chunk - 1;
  }
  return quantizedEnd + spec.residual - 1;
}

}  // namespace

Status QuantizedCacheStore::storeTensor(int layer, bool isKey, int T, const float* exact, const float* exactPreRope,
                                        const CalibrationLayer* cal, StoredRows& out) const {
  const QuantSpec& spec = (isKey ? key_ : value_)[static_cast<size_t>(layer)];
  const int kvh = kvHeads_, d = headDim_, kvDim = kvh * d;
  const std::string what = std::string(isKey ? "key" : "value") + " of layer " + std::to_string(layer);
  out.since.assign(static_cast<size_t>(T), StoredRows::kNever);
  out.rows.assign(static_cast<size_t>(T) * kvDim, 0.0f);
  const StreamingMode mode = streamingModeFor(spec);
  if (mode == StreamingMode::Exact) return Status::ok();
  const bool prerope = isKey && spec.prerope;
  const float* source = prerope ? exactPreRope : exact;

  auto gather = [&](Tensor3& x, int first, int count, int tensorFirst) {
    for (int h = 0; h < kvh; ++h)
      for (int t = 0; t < count; ++t)
        std::memcpy(x.row(h, tensorFirst + t), source + static_cast<size_t>(first + t) * kvDim + static_cast<size_t>(h) * d,
                    sizeof(float) * static_cast<size_t>(d));
  };
  auto scatter = [&](const Tensor3& x, int first, int count, int tensorFirst) {
    for (int h = 0; h < kvh; ++h)
      for (int t = 0; t < count; ++t)
        std::memcpy(out.rows.data() + static_cast<size_t>(first + t) * kvDim + static_cast<size_t>(h) * d,
                    x.row(h, tensorFirst + t), sizeof(float) * static_cast<size_t>(d));
  };
  // One chunk alone (token-local rows, a channel group): no kept tokens inside it, RoPE at the
  // chunk's own positions.
  auto quantizeChunk = [&](int first, int count) -> Status {
    Tensor3 x(kvh, count, d);
    gather(x, first, count, 0);
    QuantSpec chunkSpec = spec;
    chunkSpec.sinks = 0;
    chunkSpec.residual = 0;
    chunkSpec.chunk = 0;
    chunkSpec.prerope = false;
    QuantInput input;
    input.tensor = &x;
    auto q = quantizeTensor(input, chunkSpec);
    if (!q) return q.status().withContext(what);
    if (prerope) applyRope(q->reconstruction, rope_, first);
    scatter(q->reconstruction, first, count, 0);
    return Status::ok();
  };
  // Calibrated: the dump's whole tensor, with this token's row replaced by the replay's.
  auto quantizeCalibrated = [&](int t) -> Status {
    if (cal == nullptr)
      return Status::invalidArgument("spec '" + toString(spec) +
                                     "' needs scales of the whole cache, which a replay without a dump lacks");
    const Tensor3& reference = isKey ? cal->key : cal->value;
    if (reference.tokens < T || reference.heads != kvh || reference.dim != d)
      return Status::invalidArgument("the dump's tensors do not cover the replay (layer " + std::to_string(layer) + ")");
    if (prerope && cal->keyPreRope.heads == 0)
      return Status::invalidArgument("spec '" + toString(spec) + "' needs key_pre_rope in the dump");
    Tensor3 tensor = reference;
    Tensor3 preRope;
    QuantSpec fullSpec = spec;
    fullSpec.residual = 0;  // the sliding window and the chunks are handled here, not at the end of the dump
    fullSpec.chunk = 0;
    QuantInput input;
    input.rope = rope_;
    input.tensor = &tensor;
    if (prerope) {
      preRope = cal->keyPreRope;
      gather(preRope, t, 1, t);
      input.preRope = &preRope;
    } else {
      gather(tensor, t, 1, t);
    }
    auto q = quantizeTensor(input, fullSpec);
    if (!q) return q.status().withContext(what);
    scatter(q->reconstruction, t, 1, t);
    return Status::ok();
  };

  const int first = spec.sinks;
  if (mode == StreamingMode::ChannelGroups) {
    for (int g0 = first; g0 + spec.group <= T; g0 += spec.group) {
      const int since = firstHeld(spec, g0 + spec.group);
      if (since >= T) break;  // completes after the last position: never read
      KVS_RETURN_IF_ERROR(quantizeChunk(g0, spec.group));
      std::fill(out.since.begin() + g0, out.since.begin() + g0 + spec.group, since);
    }
    return Status::ok();
  }
  for (int t = first; t < T; ++t) {
    const int since = firstHeld(spec, t + 1);
    if (since >= T) break;
    KVS_RETURN_IF_ERROR(mode == StreamingMode::Calibrated ? quantizeCalibrated(t) : quantizeChunk(t, 1));
    out.since[static_cast<size_t>(t)] = since;
  }
  return Status::ok();
}

Status QuantizedCacheStore::store(int layer, int tokens, const float* key, const float* keyPreRope,
                                  const float* value, StoredRows& storedKey, StoredRows& storedValue) {
  const bool calibrated = streamingModeFor(key_[static_cast<size_t>(layer)]) == StreamingMode::Calibrated ||
                          streamingModeFor(value_[static_cast<size_t>(layer)]) == StreamingMode::Calibrated;
  CalibrationLayer cal;
  if (calibrated && calibration_) {
    auto c = calibration_(layer);
    if (!c) return c.status();
    cal = std::move(*c);
  }
  const CalibrationLayer* calPtr = calibrated && calibration_ ? &cal : nullptr;
  KVS_RETURN_IF_ERROR(storeTensor(layer, true, tokens, key, keyPreRope, calPtr, storedKey));
  return storeTensor(layer, false, tokens, value, nullptr, calPtr, storedValue);
}

Status QuantizedCacheStore::transformQuery(int layer, int tokens, int heads, float* query) const {
  if (querySpec_.empty() || querySpec_[static_cast<size_t>(layer)].empty()) return Status::ok();
  auto spec = parseSpec(querySpec_[static_cast<size_t>(layer)]);
  if (!spec) return spec.status().withContext("the engine's query conversion");
  const int d = headDim_;
  Tensor3 q(heads, tokens, d);
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      std::memcpy(q.row(h, t), query + (static_cast<size_t>(t) * heads + h) * d, sizeof(float) * static_cast<size_t>(d));
  QuantInput input;
  input.tensor = &q;
  auto r = quantizeTensor(input, *spec);
  if (!r) return r.status().withContext("the engine's query conversion, layer " + std::to_string(layer));
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      std::memcpy(query + (static_cast<size_t>(t) * heads + h) * d, r->reconstruction.row(h, t),
                  sizeof(float) * static_cast<size_t>(d));
  return Status::ok();
}

CacheStore QuantizedCacheStore::asCacheStore(int heads) {
  CacheStore s;
  s.store = [this](int layer, int tokens, const float* key, const float* keyPreRope, const float* value,
                   StoredRows& sk, StoredRows& sv) { return store(layer, tokens, key, keyPreRope, value, sk, sv); };
  if (!querySpec_.empty()) {
    s.transformQuery = [this, heads](int layer, int tokens, float* query) {
      return transformQuery(layer, tokens, heads, query);
    };
  }
  return s;
}

}  // namespace kvscope
