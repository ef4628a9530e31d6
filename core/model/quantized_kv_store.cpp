// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/quantized_kv_store.h"

#include <algorithm>
#include <cstring>

#include "core/quant/format_table.h"

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

QuantizedKvStore::QuantizedKvStore(const ModelConfig& config, const Plan& key, const Plan& value,
                                   RopeParams rope, std::vector<CalibrationLayer> calibration)
    : config_(config), rope_(rope), calibration_(std::move(calibration)) {
  for (int l = 0; l < config.layers; ++l) {
    key_.push_back(specForLayer(key, l, config.layers));
    value_.push_back(specForLayer(value, l, config.layers));
  }
  const size_t rows = static_cast<size_t>(config.seqLen) * static_cast<size_t>(config.kvDim());
  keyState_.assign(static_cast<size_t>(config.layers), TensorState{std::vector<float>(rows), 0});
  valueState_.assign(static_cast<size_t>(config.layers), TensorState{std::vector<float>(rows), 0});
}

Status QuantizedKvStore::store(int layer, int position, LayerCache& cache) {
  KVS_RETURN_IF_ERROR(advance(layer, position, true, cache, keyState_[static_cast<size_t>(layer)]));
  return advance(layer, position, false, cache, valueState_[static_cast<size_t>(layer)]);
}

Status QuantizedKvStore::advance(int layer, int position, bool isKey, LayerCache& cache, TensorState& state) {
  const QuantSpec& spec = (isKey ? key_ : value_)[static_cast<size_t>(layer)];
  std::vector<float>& stored = isKey ? cache.key : cache.value;
  const std::vector<float>& exact = isKey ? cache.exactKey : cache.exactValue;
  const size_t rowBytes = sizeof(float) * static_cast<size_t>(cache.kvDim);
  // The newest token always arrives exact; quantization below may replace it.
  std::memcpy(cache.row(stored, position), cache.row(exact, position), rowBytes);
  const StreamingMode mode = streamingModeFor(spec);
  if (mode == StreamingMode::Exact) return Status::ok();

  // Tokens [sinks, eligibleEnd) have left the residual window, or belong to a filled chunk, and
  // must be stored quantized.
  const int first = spec.sinks;
  const int eligibleEnd = spec.chunk > 0 ? first + std::max(0, position + 1 - first) / spec.chunk * spec.chunk
                                         : position + 1 - spec.residual;
  const int available = eligibleEnd - first;
  const int before = state.done;
  if (mode == StreamingMode::ChannelGroups) {
    while (state.done + spec.group <= available) {
      KVS_RETURN_IF_ERROR(quantizeRows(layer, isKey, first + state.done, spec.group, cache,
                                       state.rows.data()));
      state.done += spec.group;
    }
  } else {
    while (state.done < available) {
      KVS_RETURN_IF_ERROR(quantizeRows(layer, isKey, first + state.done, 1, cache, state.rows.data()));
      ++state.done;
    }
  }
  for (int t = first + before; t < first + state.done; ++t) {
    std::memcpy(cache.row(stored, t), state.rows.data() + static_cast<size_t>(t) * cache.kvDim, rowBytes);
  }
  return Status::ok();
}

Status QuantizedKvStore::quantizeRows(int layer, bool isKey, int first, int count, const LayerCache& cache,
                                      float* out) {
  const QuantSpec& spec = (isKey ? key_ : value_)[static_cast<size_t>(layer)];
  const int kvh = config_.kvHeads, d = config_.headDim();
  const bool prerope = isKey && spec.prerope;
  const std::vector<float>& source = prerope ? cache.exactKeyPreRope : (isKey ? cache.exactKey : cache.exactValue);
  auto gather = [&](Tensor3& x, int tensorFirst) {
    for (int h = 0; h < kvh; ++h)
      for (int t = 0; t < count; ++t)
        std::memcpy(x.row(h, tensorFirst + t), cache.row(source, first + t) + static_cast<size_t>(h) * d,
                    sizeof(float) * static_cast<size_t>(d));
  };
  auto scatter = [&](const Tensor3& x, int tensorFirst) {
    for (int h = 0; h < kvh; ++h)
      for (int t = 0; t < count; ++t)
        std::memcpy(out + static_cast<size_t>(first + t) * cache.kvDim + static_cast<size_t>(h) * d,
                    x.row(h, tensorFirst + t), sizeof(float) * static_cast<size_t>(d));
  };

  if (streamingModeFor(spec) != StreamingMode::Calibrated) {
    // The chunk alone: no kept tokens inside it, and RoPE at the chunk's own positions.
    Tensor3 x(kvh, count, d);
    gather(x, 0);
    QuantSpec chunkSpec = spec;
    chunkSpec.sinks = 0;
    chunkSpec.residual = 0;
    chunkSpec.chunk = 0;
    chunkSpec.prerope = false;
    QuantInput input;
    input.tensor = &x;
    auto q = quantizeTensor(input, chunkSpec);
    if (!q) return q.status().withContext(std::string(isKey ? "key" : "value") + " of layer " + std::to_string(layer));
    if (prerope) applyRope(q->reconstruction, rope_, first);
    scatter(q->reconstruction, 0);
    return Status::ok();
  }

  // Calibrated: the dump's whole tensor, with this token's row replaced by the replay's.
  if (static_cast<size_t>(layer) >= calibration_.size() || calibration_[static_cast<size_t>(layer)].key == nullptr)
    return Status::invalidArgument("spec '" + toString(spec) +
                                   "' needs scales of the whole cache, which a replay without a dump lacks");
  const CalibrationLayer& cal = calibration_[static_cast<size_t>(layer)];
  const Tensor3* reference = isKey ? cal.key : cal.value;
  if (reference == nullptr || reference->tokens < first + count || reference->heads != kvh || reference->dim != d)
    return Status::invalidArgument("the dump's tensors do not cover the replay (layer " + std::to_string(layer) + ")");
  if (prerope && cal.keyPreRope == nullptr)
    return Status::invalidArgument("spec '" + toString(spec) + "' needs key_pre_rope in the dump");
  Tensor3 tensor = *reference;
  Tensor3 preRope;
  QuantSpec fullSpec = spec;
  fullSpec.residual = 0;  // the sliding window and the chunks are handled here, not at the end of the dump
  fullSpec.chunk = 0;
  QuantInput input;
  input.rope = rope_;
  input.tensor = &tensor;
  if (prerope) {
    preRope = *cal.keyPreRope;
    gather(preRope, first);
    input.preRope = &preRope;
  } else {
    gather(tensor, first);
  }
  auto q = quantizeTensor(input, fullSpec);
  if (!q) return q.status().withContext(std::string(isKey ? "key" : "value") + " of layer " + std::to_string(layer));
  scatter(q->reconstruction, first);
  return Status::ok();
}

}  // namespace kvscope
