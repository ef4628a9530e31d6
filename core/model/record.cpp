// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/record.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/model/transformer.h"

namespace kvscope {

Expected<std::vector<int>> parseTokenList(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0)
      return Status::invalidArgument("token list '" + text + "': '" + item +
                                     "' is not a token id (expected non-negative integers separated by commas)");
    out.push_back(value);
    pos = comma + 1;
  }
  return out;
}

Expected<Recording> recordSequence(const std::shared_ptr<const Checkpoint>& model,
                                   const RecordOptions& options, const Progress& progress) {
  const ModelConfig& c = model->config();
  const int T = options.steps;
  if (T < 1 || T > c.seqLen)
    return Status::invalidArgument("--steps " + std::to_string(T) + ": must be between 1 and the model's seq_len " +
                                   std::to_string(c.seqLen) + " (positions in the dump, BOS included)");
  // A prompt copied from a tokenizer often starts with BOS already; the dump holds one.
  std::vector<int> prompt = options.promptTokens;
  if (!prompt.empty() && prompt.front() == kBosToken) prompt.erase(prompt.begin());
  if (static_cast<int64_t>(prompt.size()) > T - 1)
    return Status::invalidArgument("the prompt has " + std::to_string(prompt.size()) +
                                   " tokens but --steps " + std::to_string(T) + " leaves room for " +
                                   std::to_string(T - 1) + " after BOS");
  for (int t : prompt) {
    if (t < 0 || t >= c.vocabSize)
      return Status::invalidArgument("prompt token " + std::to_string(t) + " is outside the vocabulary [0, " +
                                     std::to_string(c.vocabSize) + ")");
  }
  if (!(options.temperature >= 0.0))
    return Status::invalidArgument("--temperature must be 0 (greedy) or positive");

  Recording rec;
  rec.model = std::filesystem::path(model->path()).stem().string();
  std::error_code ec;
  auto absolute = std::filesystem::absolute(model->path(), ec);
  rec.modelPath = ec ? model->path() : absolute.lexically_normal().string();
  rec.vocabSize = c.vocabSize;
  rec.ropeTheta = kLlamaRopeTheta;
  rec.ropeStyle = RopeStyle::Interleaved;
  std::vector<std::string> pieces;
  if (!options.tokenizerPath.empty()) {
    auto loaded = loadTokenizer(options.tokenizerPath, c.vocabSize);
    if (!loaded) return loaded.status();
    pieces = std::move(*loaded);
  }

  const int D = c.headDim();
  rec.layers.resize(static_cast<size_t>(c.layers));
  for (LayerRecording& lr : rec.layers) {
    lr.key = Tensor3(c.kvHeads, T, D);
    lr.keyPreRope = Tensor3(c.kvHeads, T, D);
    lr.value = Tensor3(c.kvHeads, T, D);
    lr.query = Tensor3(c.heads, T, D);
  }
  rec.logits.resize(static_cast<size_t>(T) * static_cast<size_t>(c.vocabSize));

  Transformer tf(model);
  SplitMix64 rng(options.seed);
  int token = kBosToken;
  for (int pos = 0; pos < T; ++pos) {
    rec.tokens.push_back(token);
    if (!pieces.empty()) rec.tokenText.push_back(pieces[static_cast<size_t>(token)]);
    KVS_RETURN_IF_ERROR(tf.step(token, pos));
    for (int l = 0; l < c.layers; ++l) {
      LayerRecording& lr = rec.layers[static_cast<size_t>(l)];
      const LayerCache& lc = tf.cache(l);
      for (int g = 0; g < c.kvHeads; ++g) {
        const size_t off = static_cast<size_t>(g) * D, bytes = sizeof(float) * static_cast<size_t>(D);
        std::memcpy(lr.key.row(g, pos), lc.row(lc.exactKey, pos) + off, bytes);
        std::memcpy(lr.keyPreRope.row(g, pos), lc.row(lc.exactKeyPreRope, pos) + off, bytes);
        std::memcpy(lr.value.row(g, pos), lc.row(lc.exactValue, pos) + off, bytes);
      }
      const std::vector<float>& q = tf.query(l);
      for (int h = 0; h < c.heads; ++h)
        std::memcpy(lr.query.row(h, pos), q.data() + static_cast<size_t>(h) * D, sizeof(float) * static_cast<size_t>(D));
    }
    std::copy(tf.logits().begin(), tf.logits().end(),
              rec.logits.begin() + static_cast<ptrdiff_t>(pos) * c.vocabSize);
    if (pos + 1 < T) {
      const size_t next = static_cast<size_t>(pos);
      token = next < prompt.size() ? prompt[next]
                                                  : sampleToken(tf.logits(), options.temperature, rng);
    }
    if (!report(progress, static_cast<double>(pos + 1) / T, "running the model")) return Status::cancelled();
  }
  return rec;
}

Expected<Recording> readRecording(const Dump& dump, const Progress& progress) {
  const DumpInfo& info = dump.info();
  Recording rec;
  rec.model = info.model;
  rec.modelPath = info.modelPath;
  rec.ropeTheta = info.ropeTheta;
  rec.ropeStyle = info.ropeStyle;
  auto tokens = dump.tokens();
  if (!tokens) return tokens.status();
  if (tokens->empty())
    return Status::invalidData(info.path + ": no /tokens dataset: e2e replays the recorded token sequence");
  for (int64_t t : *tokens) {
    if (t < 0 || t > std::numeric_limits<int>::max())
      return Status::invalidData(info.path + ": /tokens: id " + std::to_string(t) + " is not a token id");
    rec.tokens.push_back(static_cast<int>(t));
  }
  if (info.hasTokenText) {
    auto text = dump.tokenText();
    if (!text) return text.status();
    rec.tokenText = std::move(*text);
  }
  if (info.hasLogits) {
    auto logits = dump.logits();
    if (!logits) return logits.status();
    rec.logits = std::move(*logits);
    if (!rec.tokens.empty()) rec.vocabSize = static_cast<int>(rec.logits.size() / rec.tokens.size());
  }
  rec.layers.resize(static_cast<size_t>(info.layers));
  for (int l = 0; l < info.layers; ++l) {
    LayerRecording& lr = rec.layers[static_cast<size_t>(l)];
    auto key = dump.read(l, TensorKind::Key);
    if (!key) return key.status();
    lr.key = std::move(*key);
    auto value = dump.read(l, TensorKind::Value);
    if (!value) return value.status();
    lr.value = std::move(*value);
    if (info.hasKeyPreRope) {
      auto pre = dump.read(l, TensorKind::KeyPreRope);
      if (!pre) return pre.status();
      lr.keyPreRope = std::move(*pre);
    }
    if (!report(progress, static_cast<double>(l + 1) / info.layers, "reading the dump")) return Status::cancelled();
  }
  return rec;
}

}  // namespace kvscope
