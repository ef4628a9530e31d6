// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/io/dump_writer.h"
#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/util/system.h"

namespace kvscope {

Expected<int> recordSteps(const Model& model, size_t inputTokens, std::optional<int> requested, bool noInput,
                          const std::string& flag) {
  if (!requested) return noInput ? std::min(256, model.hparams().contextLength) : 0;
  if (*requested < static_cast<int>(inputTokens))
    return Status::invalidArgument(flag + " " + std::to_string(*requested) + ": the input already has " +
                                   std::to_string(inputTokens) + " tokens (" + flag +
                                   " counts every position, the input included)");
  return *requested;
}

Expected<std::vector<int>> parseTokenList(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    // Whitespace around items (a file written one id per line, "1, 2") is not an error.
    const auto b = item.find_first_not_of(" \t\r\n");
    item = b == std::string::npos ? std::string() : item.substr(b, item.find_last_not_of(" \t\r\n") - b + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0)
      return Status::invalidArgument("token list '" + (text.size() > 80 ? text.substr(0, 80) + "…" : text) + "': '" +
                                     item + "' is not a token id (expected non-negative integers separated by commas)");
    out.push_back(value);
    pos = comma + 1;
  }
  return out;
}

Expected<std::vector<int>> recordInputTokens(const Model& model, const RecordInput& input) {
  if (input.tokens) return *input.tokens;
  if (input.text) return model.tokenize(*input.text);
  std::vector<int> out;
  std::vector<int> prompt = input.promptTokens;
  if (model.bos()) {
    // A prompt copied from a tokenizer often starts with BOS already; the dump holds one.
    if (!prompt.empty() && prompt.front() == *model.bos()) prompt.erase(prompt.begin());
    out.push_back(*model.bos());
  }
  out.insert(out.end(), prompt.begin(), prompt.end());
  if (out.empty())
    return Status::invalidArgument(model.path() + ": the model names no BOS token: give the sequence with --tokens or --text");
  return out;
}

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int sampleToken(const std::vector<float>& logits, double temperature, SplitMix64& rng) {
  const int n = static_cast<int>(logits.size());
  if (temperature <= 0) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = std::exp((logits[static_cast<size_t>(i)] - mx) / temperature);
    sum += p[static_cast<size_t>(i)];
  }
  const double u = rng.uniform() * sum;
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    acc += p[static_cast<size_t>(i)];
    if (u < acc) return i;
  }
  return n - 1;  // rounding left u at the very top
}

namespace {

/// [T, heads·D] position-major rows → [heads, T, D] (the dump's layout).
void toHeadMajor(const float* rows, int count, int heads, int d, int firstRow, Tensor3& out) {
  for (int t = 0; t < count; ++t)
    for (int h = 0; h < heads; ++h)
      std::memcpy(out.row(h, firstRow + t), rows + (static_cast<size_t>(t) * heads + h) * d,
                  sizeof(float) * static_cast<size_t>(d));
}

}  // namespace

Expected<RecordSummary> recordDump(const std::shared_ptr<const Model>& model, const RecordOptions& options,
                                   const std::string& path, const Progress& progress) {
  const ModelHparams& hp = model->hparams();
  const int input = static_cast<int>(options.tokens.size());
  const int T = std::max(options.steps, input);
  if (input < 1) return Status::invalidArgument("the input sequence is empty: give at least one token");
  if (T > hp.contextLength)
    return Status::invalidArgument(std::to_string(T) + " positions exceed the model's context length " +
                                   std::to_string(hp.contextLength) + " (--steps and the input together)");
  for (size_t i = 0; i < options.tokens.size(); ++i) {
    const int t = options.tokens[i];
    if (t < 0 || t >= hp.vocab)
      return Status::invalidArgument("token " + std::to_string(t) + " at position " + std::to_string(i) +
                                     " is outside the model's vocabulary [0, " + std::to_string(hp.vocab) + ")");
  }
  if (!(options.temperature >= 0.0) || !std::isfinite(options.temperature))
    return Status::invalidArgument("--temperature must be 0 (greedy) or a positive finite number");

  // Work shares for progress: sampling (one forward per token), then the recorded pass.
  const int sampledCount = T - input;
  const double sampleShare = sampledCount > 0 ? 0.5 : 0.0;
  RecordSummary summary;
  summary.tokens = options.tokens;
  Forward forward(model);
  if (sampledCount > 0) {
    // Decoding one token at a time dequantizes every layer per token unless the layers stay in
    // memory: keep as many as a quarter of the available memory holds.
    forward.setWeightCacheBytes(static_cast<size_t>(std::max<int64_t>(memAvailableBytes(), 0) / 4));
    Stream stream;
    SplitMix64 rng(options.seed);
    KVS_RETURN_IF_ERROR(forward.run(stream, options.tokens));
    std::vector<float> logits;
    while (static_cast<int>(summary.tokens.size()) < T) {
      KVS_RETURN_IF_ERROR(lastLogits(forward, stream, logits));
      const int next = sampleToken(logits, options.temperature, rng);
      summary.tokens.push_back(next);
      ++summary.sampled;
      if (!report(progress, sampleShare * summary.sampled / sampledCount, "sampling token " +
                                                                               std::to_string(summary.sampled) +
                                                                               " of " + std::to_string(sampledCount)))
        return Status::cancelled();
      if (static_cast<int>(summary.tokens.size()) < T) {
        const int one[1] = {next};
        KVS_RETURN_IF_ERROR(forward.run(stream, one));
      }
    }
    forward.setWeightCacheBytes(0);
  }

  DumpWriterOptions o;
  o.layers = hp.layers;
  o.kvHeads = hp.kvHeads;
  o.tokens = T;
  o.headDim = hp.headDim;
  o.heads = hp.heads;
  o.queries = T;
  o.keyPreRope = true;
  o.withTokens = true;
  o.withTokenText = model->hasTokenText();
  o.logitsVocab = options.logits ? hp.vocab : 0;
  o.dtype = DiskType::Float32;
  o.model = model->name();
  o.ropeTheta = hp.rope.theta;
  o.ropeStyle = hp.rope.style;
  o.ropeInvFreq = hp.rope.invFreq;
  std::error_code ec;
  auto absolute = std::filesystem::absolute(model->path(), ec);
  o.stringAttributes["model_path"] = ec ? model->path() : absolute.lexically_normal().string();
  o.stringAttributes["model_format"] = modelFormatKey(model->format());
  o.stringAttributes["architecture"] = std::string(model->architecture().name);
  o.stringAttributes["rope_scaling"] = hp.rope.scaling;
  double done = sampleShare;  // the last fraction reported, for the writer's cancellation checks
  o.cancel = [&](double, std::string_view) { return report(progress, done, "writing the dump"); };
  auto writer = DumpWriter::create(path, o);
  if (!writer) return writer.status();

  // The recorded pass: the whole sequence, one layer at a time, each layer written as it is done.
  Tensor3 q(hp.heads, T, hp.headDim), kPre(hp.kvHeads, T, hp.headDim), k(hp.kvHeads, T, hp.headDim),
      v(hp.kvHeads, T, hp.headDim);
  auto observe = [&](const LayerTensors& t) -> Status {
    toHeadMajor(t.query, t.count, hp.heads, hp.headDim, t.first, q);
    toHeadMajor(t.keyPreRope, t.count, hp.kvHeads, hp.headDim, t.first, kPre);
    toHeadMajor(t.key, t.count, hp.kvHeads, hp.headDim, t.first, k);
    toHeadMajor(t.value, t.count, hp.kvHeads, hp.headDim, t.first, v);
    KVS_RETURN_IF_ERROR((*writer)->write(t.layer, TensorKind::Query, q));
    KVS_RETURN_IF_ERROR((*writer)->write(t.layer, TensorKind::KeyPreRope, kPre));
    KVS_RETURN_IF_ERROR((*writer)->write(t.layer, TensorKind::Key, k));
    return (*writer)->write(t.layer, TensorKind::Value, v);
  };
  auto layerProgress = [&](double f, std::string_view what) {
    done = sampleShare + (1.0 - sampleShare) * f * (options.logits ? 0.9 : 1.0);
    return report(progress, done, what);
  };
  Stream stream;
  KVS_RETURN_IF_ERROR(forward.run(stream, summary.tokens, observe, layerProgress));
  std::vector<int64_t> ids(summary.tokens.begin(), summary.tokens.end());
  KVS_RETURN_IF_ERROR((*writer)->writeTokens(ids));
  if (o.withTokenText) {
    std::vector<std::string> text;
    text.reserve(summary.tokens.size());
    for (int t : summary.tokens) text.push_back(model->tokenText(t));
    KVS_RETURN_IF_ERROR((*writer)->writeTokenText(text));
  }
  if (options.logits) {
    std::vector<float> all;
    KVS_RETURN_IF_ERROR(allLogits(forward, stream, all, [&](double f) {
      return report(progress, sampleShare + (1.0 - sampleShare) * (0.9 + 0.1 * f), "computing the logits");
    }));
    KVS_RETURN_IF_ERROR((*writer)->writeLogits(all));
  }
  KVS_RETURN_IF_ERROR((*writer)->finish());
  return summary;
}

}  // namespace kvscope
