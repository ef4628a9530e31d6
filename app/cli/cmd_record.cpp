// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli record`: run a llama2.c checkpoint and write its attention state as a KV dump
// (docs/real-models.md).
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/model/checkpoint.h"
#include "core/model/record.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string model;
  std::string out;
  int steps = 256;
  uint64_t seed = 0;
  double temperature = 0.0;
  std::string prompt;
  std::string tokenizer;
  bool stepsGiven = false;
};

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "model", o->model, "llama2.c float32 checkpoint (e.g. stories260K.bin)")->required();
  addOutputOption(sub, "--out", o->out, "the dump to write (HDF5)", false)->required();
  auto* steps = sub.add_option("--steps", o->steps,
                               "positions in the dump, BOS included (default 256, at most the model's seq_len)");
  sub.add_option("--seed", o->seed, "seed of the sampler (default 0)")
      ->check(wholeNumberCheck(0, std::numeric_limits<uint64_t>::max()));
  sub.add_option("--temperature", o->temperature, "sampling temperature; 0 (default) = greedy")
      ->check(numberCheck("a finite number ≥ 0", [](double v) { return v >= 0; }));
  sub.add_option("--prompt-tokens", o->prompt, "token ids forced after BOS, e.g. 1,403,407");
  addInputOption(sub, "--tokenizer", o->tokenizer, "llama2.c tokenizer.bin, to store each token's text");
  return [o, steps]() -> int {
    auto model = Checkpoint::load(o->model);
    if (!model) return fail(model.status());
    RecordOptions options;
    // The default never exceeds a small model's context.
    options.steps = steps->count() > 0 ? o->steps : std::min(o->steps, (*model)->config().seqLen);
    options.seed = o->seed;
    options.temperature = o->temperature;
    options.tokenizerPath = o->tokenizer;
    auto prompt = parseTokenList(o->prompt);
    if (!prompt) return fail(prompt.status().withContext("--prompt-tokens"));
    options.promptTokens = *prompt;
    auto rec = recordSequence(*model, options, cancellationProgress());
    if (!rec) return fail(rec.status().withContext(o->model));
    if (Status s = writeRecording(o->out, *rec, cancellationProgress()); !s.isOk()) return fail(s);
    const ModelConfig& c = (*model)->config();
    std::cout << "wrote " << o->out << ": " << c.layers << " layers, " << c.kvHeads << " kv heads, " << c.heads
              << " query heads, " << rec->tokenCount() << " tokens, head dim " << c.headDim() << "\n";
    return kExitOk;
  };
};

const Registrar registrar{"record", "run a llama2.c checkpoint and write its keys, values, queries and logits as a dump",
                          setup};

}  // namespace
}  // namespace kvscope::cli
