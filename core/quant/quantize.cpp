// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline's entry points (quantization.md §1) and the choice between its two
// implementations, the reference composition (pipeline_reference.cpp) and the fast strategy
// (pipeline_fast.cpp). The storage accounting of §5 is core/quant/storage.cpp, beside the table.
#include "core/quant/quantize.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/quant/finite_check.h"
#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/hqq.h"
#include "core/quant/pipeline_fast.h"
#include "core/quant/pipeline_reference.h"
#include "core/quant/rotation.h"

namespace kvscope {

namespace {

/// QuantPath::Auto's override from the environment (KVSCOPE_QUANT_PATH=reference|fast), read
/// once; Auto when unset or anything else.
QuantPath environmentPath() {
  static const QuantPath path = [] {
    const char* value = std::getenv("KVSCOPE_QUANT_PATH");
    if (value == nullptr) return QuantPath::Auto;
    if (std::strcmp(value, "reference") == 0) return QuantPath::Reference;
    if (std::strcmp(value, "fast") == 0) return QuantPath::Fast;
    return QuantPath::Auto;
  }();
  return path;
}

}  // namespace

QuantPath autoQuantPath(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  return fastStrategyCovers(spec, kvHeads, tokens, headDim) ? QuantPath::Fast : QuantPath::Reference;
}

Status quantizeTensorInto(const QuantInput& input, const QuantSpec& spec, QuantOutput& out,
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
  if (rotates(spec)) KVS_RETURN_IF_ERROR(checkRotation(spec, source->dim).withContext("spec '" + specText + "'"));
  Tensor3& recon = out.reconstruction;
  if (source == &recon) return Status::internal("quantizeTensorInto: the output aliases the input");
  if (source->size() != static_cast<size_t>(source->heads * source->tokens * source->dim)) {
    return Status::internal("quantizeTensor: tensor data size does not match its shape");
  }
  const int64_t kvh = source->heads, tokens = source->tokens, d = source->dim;
  const bool quantize = quantizedTokens(spec, tokens).count > 0 && !formatInfo(spec.format).exact;
  if (quantize) KVS_RETURN_IF_ERROR(checkFormatSpec(spec, kvh, d).withContext("spec '" + specText + "'"));
  out.storage = storageFor(spec, kvh, tokens, d);

  const QuantPath asked = input.path == QuantPath::Auto ? environmentPath() : input.path;
  bool nonFinite = false;
  bool handled = false;
  Status st;
  if (asked != QuantPath::Reference && fastStrategyCovers(spec, kvh, tokens, d)) {
    recon.heads = kvh;
    recon.tokens = tokens;
    recon.dim = d;
    recon.data.resize(source->size());  // reuses the buffer's capacity
    st = quantizeFast(*source, spec, recon, progress, nonFinite, handled);
    if (handled && !nonFinite && st.isOk() && spec.prerope) applyRope(recon, input.rope);
  }
  out.path = handled ? QuantPath::Fast : QuantPath::Reference;
  if (!handled) st = quantizeReference(reference, input.preRope, input.rope, spec, recon, progress, nonFinite);
  if (nonFinite) {
    recon = Tensor3{};
    return Status::invalidData(std::string(spec.prerope ? "key_pre_rope" : "input") + ": " +
                               firstNonFinite(*source) + " (quantization needs finite values)");
  }
  if (!st.isOk()) {
    recon = Tensor3{};  // no half-built result
    return st;
  }
  if (!report(progress, 1.0, "done")) {
    recon = Tensor3{};
    return Status::cancelled();
  }
  return Status::ok();
}

Expected<QuantOutput> quantizeTensor(const QuantInput& input, const QuantSpec& spec,
                                     const Progress& progress) {
  QuantOutput out;
  KVS_RETURN_IF_ERROR(quantizeTensorInto(input, spec, out, progress));
  return out;
}

}  // namespace kvscope
