// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli model-info`: what kvscope reads of a model file — format, architecture, dims,
// weight types and sizes, tokenizer, RoPE — and its fp16 KV cache per token (docs/real-models.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "app/cli/command.h"
#include "core/model/model.h"
#include "core/tokenize/tokenizer.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string model;
  std::string tokenizer;
  std::string json;
};

std::string bytesText(uint64_t b) {
  char buf[64];
  if (b >= (1ULL << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ULL << 30));
  } else if (b >= (1ULL << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ULL << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  }
  return buf;
}

nlohmann::ordered_json describe(const Model& m) {
  const ModelHparams& hp = m.hparams();
  nlohmann::ordered_json j;
  j["kvscope_model_info"] = 1;
  j["path"] = m.path();
  j["name"] = m.name();
  j["format"] = modelFormatKey(m.format());
  j["architecture"] = std::string(m.architecture().name);
  j["layers"] = hp.layers;
  j["embedding_length"] = hp.dim;
  j["feed_forward_length"] = hp.ffn;
  j["heads"] = hp.heads;
  j["kv_heads"] = hp.kvHeads;
  j["head_dim"] = hp.headDim;
  j["vocab"] = hp.vocab;
  j["context_length"] = hp.contextLength;
  j["rms_epsilon"] = hp.rmsEps;
  j["qkv_bias"] = hp.qkvBias;
  j["qk_norm"] = hp.qkNorm;
  j["tied_embeddings"] = hp.tiedEmbeddings;
  if (hp.slidingWindow > 0) j["sliding_window"] = hp.slidingWindow;
  j["rope"] = {{"style", ropeStyleName(hp.rope.style)},
               {"theta", hp.rope.theta},
               {"scaling", hp.rope.scaling},
               {"inv_freq", hp.rope.invFreq}};
  if (hp.rope.scaling != "none") j["rope"]["factor"] = hp.rope.scalingFactor;
  // K and V of every layer in fp16: 2 tensors × L × KVH × D × 2 bytes per token.
  j["kv_bytes_per_token_fp16"] = int64_t{2} * hp.layers * hp.kvHeads * hp.headDim * 2;
  j["file_bytes"] = m.fileBytes();
  if (const Tokenizer* t = m.tokenizer()) {
    j["tokenizer"] = {{"description", t->describe()},
                      {"vocab", t->vocabSize()},
                      {"bos", t->bos() ? nlohmann::ordered_json(*t->bos()) : nlohmann::ordered_json(nullptr)},
                      {"eos", t->eos() ? nlohmann::ordered_json(*t->eos()) : nlohmann::ordered_json(nullptr)},
                      {"adds_bos", t->addsBos()}};
  } else {
    j["tokenizer"] = nullptr;
  }
  std::map<std::string, std::pair<int64_t, uint64_t>> types;  // type → tensors, bytes
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const WeightInfo& w : m.weights()) {
    tensors.push_back({{"name", w.name}, {"shape", w.shape}, {"type", w.type}, {"bytes", w.bytes}});
    auto& t = types[w.type];
    ++t.first;
    t.second += w.bytes;
  }
  nlohmann::ordered_json byType = nlohmann::ordered_json::object();
  for (const auto& [type, v] : types) byType[type] = {{"tensors", v.first}, {"bytes", v.second}};
  j["weight_types"] = byType;
  j["tensors"] = tensors;
  return j;
}

std::string text(const nlohmann::ordered_json& j) {
  std::ostringstream os;
  os << j["name"].get<std::string>() << " (" << j["path"].get<std::string>() << ")\n";
  os << "format " << j["format"].get<std::string>() << ", architecture " << j["architecture"].get<std::string>()
     << "\n";
  os << j["layers"] << " layers, embedding " << j["embedding_length"] << ", feed-forward " << j["feed_forward_length"]
     << ", " << j["heads"] << " query heads, " << j["kv_heads"] << " kv heads, head dim " << j["head_dim"] << "\n";
  os << "vocabulary " << j["vocab"] << ", context " << j["context_length"] << ", RMSNorm epsilon "
     << j["rms_epsilon"].get<double>() << "\n";
  os << "q/k/v biases " << (j["qkv_bias"].get<bool>() ? "yes" : "no") << ", per-head q/k norm "
     << (j["qk_norm"].get<bool>() ? "yes" : "no") << ", classifier "
     << (j["tied_embeddings"].get<bool>() ? "tied to the embedding" : "its own") << "\n";
  os << "RoPE " << j["rope"]["style"].get<std::string>() << " pairs, theta " << j["rope"]["theta"].get<double>()
     << ", scaling " << j["rope"]["scaling"].get<std::string>() << "\n";
  if (j["tokenizer"].is_null()) {
    os << "tokenizer: none (give --tokens to record)\n";
  } else {
    os << "tokenizer: " << j["tokenizer"]["description"].get<std::string>() << "\n";
  }
  os << "KV cache in fp16: " << j["kv_bytes_per_token_fp16"] << " bytes per token\n";
  os << "weights (" << bytesText(j["file_bytes"].get<uint64_t>()) << " of files):";
  for (const auto& [type, v] : j["weight_types"].items())
    os << " " << type << " " << v["tensors"] << " tensors " << bytesText(v["bytes"].get<uint64_t>()) << ";";
  os << "\n";
  return os.str();
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "a GGUF file, a Hugging Face folder or a llama2.c checkpoint")->required();
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c tokenizer.bin (llama2.c checkpoints)");
  sub.add_option("--json", o->json, "write the description as JSON to FILE ('-' = standard output)");
  return [o]() -> int {
    auto model = Model::load(o->model, o->tokenizer);
    if (!model) return fail(model.status());
    const nlohmann::ordered_json j = describe(**model);
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, j.dump(2) + "\n"); !s.isOk()) return fail(s);
    }
    if (o->json != "-") std::cout << text(j);
    return kExitOk;
  };
};

const Registrar registrar{"model-info",
                          "describe a model file as kvscope reads it: architecture, dims, weights, tokenizer, RoPE, "
                          "KV bytes per token",
                          setup};

}  // namespace
}  // namespace kvscope::cli
