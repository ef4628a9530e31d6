// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli record`: run a model (GGUF file, Hugging Face folder or llama2.c checkpoint) on a
// token sequence and write its attention state as a KV dump (docs/real-models.md).
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "core/util/atomic_file.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string model;
  std::string out;
  int steps = 0;
  uint64_t seed = 0;
  double temperature = 0.0;
  std::string tokens;
  std::string tokensFile;
  std::string textFile;
  std::string prompt;
  std::string promptTokens;
  std::string tokenizer;
  bool logits = false;
};

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "model", o->model,
                 "the model: a GGUF file, a Hugging Face folder (config.json + safetensors) or a llama2.c checkpoint")
      ->required();
  addOutputOption(sub, "--out", o->out, "the dump to write (HDF5)", false)->required();
  auto* tokens = sub.add_option("--tokens", o->tokens, "the sequence as token ids, e.g. 1,403,407 (exactly these)");
  auto* tokensFile = addInputOption(sub, "--tokens-file", o->tokensFile, "a file of token ids (commas or whitespace)");
  auto* text = addInputOption(sub, "--text", o->textFile, "a text file, tokenized with the model's tokenizer (BOS as the model says)");
  auto* prompt = sub.add_option("--prompt", o->prompt, "a text given on the command line, tokenized like --text");
  auto* promptTokens =
      sub.add_option("--prompt-tokens", o->promptTokens, "token ids after BOS (llama2.c style), e.g. 403,407");
  tokens->excludes(tokensFile)->excludes(text)->excludes(prompt)->excludes(promptTokens);
  tokensFile->excludes(text)->excludes(prompt)->excludes(promptTokens);
  text->excludes(prompt)->excludes(promptTokens);
  prompt->excludes(promptTokens);
  auto* steps = sub.add_option("--steps", o->steps,
                               "positions in the dump: the input, then sampled tokens up to this many (default: the "
                               "input alone; with no input, BOS and 256 positions)");
  sub.add_option("--seed", o->seed, "seed of the sampler (default 0)")
      ->check(wholeNumberCheck(0, std::numeric_limits<uint64_t>::max()));
  sub.add_option("--temperature", o->temperature, "sampling temperature; 0 (default) = greedy")
      ->check(numberCheck("a finite number ≥ 0", [](double v) { return v >= 0; }));
  addInputOption(sub, "--tokenizer", o->tokenizer, "llama2.c tokenizer.bin, to store each token's text (llama2.c models)");
  sub.add_flag("--logits", o->logits, "also store /logits [T, vocab] (T × vocab × 4 bytes: large for big vocabularies)");
  return [o, steps, tokens, tokensFile, text, prompt]() -> int {
    auto model = Model::load(o->model, o->tokenizer);
    if (!model) return fail(model.status());
    RecordInput input;
    if (tokens->count() > 0 || tokensFile->count() > 0) {
      std::string list = o->tokens;
      if (tokensFile->count() > 0) {
        auto content = readTextFile(o->tokensFile);
        if (!content) return fail(content.status().withContext("--tokens-file"));
        list.clear();
        for (char c : *content) list += (c == '\n' || c == '\r' || c == '\t' || c == ' ') ? ',' : c;
        // Whitespace runs become empty items: squeeze them.
        std::string squeezed;
        for (char c : list)
          if (c != ',' || (!squeezed.empty() && squeezed.back() != ',')) squeezed += c;
        while (!squeezed.empty() && squeezed.back() == ',') squeezed.pop_back();
        list = squeezed;
      }
      auto ids = parseTokenList(list);
      if (!ids) return fail(ids.status().withContext(tokensFile->count() > 0 ? "--tokens-file" : "--tokens"));
      if (ids->empty()) return fail(Status::invalidArgument("--tokens: the list is empty"));
      input.tokens = std::move(*ids);
    } else if (text->count() > 0) {
      auto content = readTextFile(o->textFile);
      if (!content) return fail(content.status().withContext("--text"));
      input.text = std::move(*content);
    } else if (prompt->count() > 0) {
      input.text = o->prompt;
    } else {
      auto ids = parseTokenList(o->promptTokens);
      if (!ids) return fail(ids.status().withContext("--prompt-tokens"));
      input.promptTokens = std::move(*ids);
    }
    auto sequence = recordInputTokens(**model, input);
    if (!sequence) return fail(sequence.status());
    RecordOptions options;
    options.tokens = std::move(*sequence);
    const bool noInput = tokens->count() == 0 && tokensFile->count() == 0 && text->count() == 0 && prompt->count() == 0;
    auto positions = recordSteps(**model, options.tokens.size(),
                                 steps->count() > 0 ? std::optional<int>(o->steps) : std::nullopt, noInput);
    if (!positions) return fail(positions.status());
    options.steps = *positions;
    options.seed = o->seed;
    options.temperature = o->temperature;
    options.logits = o->logits;
    auto summary = recordDump(*model, options, o->out, cliProgress("record"));
    if (!summary) return fail(summary.status().withContext(o->model));
    const ModelHparams& hp = (*model)->hparams();
    std::cout << "wrote " << o->out << ": " << hp.layers << " layers, " << hp.kvHeads << " kv heads, " << hp.heads
              << " query heads, " << summary->tokens.size() << " tokens (" << summary->sampled << " sampled), head dim "
              << hp.headDim << "\n";
    return kExitOk;
  };
};

const Registrar registrar{"record",
                          "run a model (GGUF, Hugging Face or llama2.c) and write its keys, values and queries as a dump",
                          setup};

}  // namespace
}  // namespace kvscope::cli
