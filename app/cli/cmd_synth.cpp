// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli synth OUT.h5`: writes a synthetic dump shaped like a real LLM's (core/synth).
#include <iostream>
#include <limits>

#include "app/cli/command.h"
#include "core/synth/synth.h"

namespace kvscope::cli {
namespace {

std::function<int()> setupSynth(CLI::App& sub) {
  auto options = std::make_shared<SynthOptions>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("fp16");
  auto rope = std::make_shared<std::string>("half");
  auto quiet = std::make_shared<bool>(false);
  addOutputOption(sub, "out", *out, "Output dump (.h5), written atomically", false)->required();
  sub.add_option("--layers", options->layers, "Layers L")->capture_default_str();
  sub.add_option("--kv-heads", options->kvHeads, "KV heads KVH")->capture_default_str();
  sub.add_option("--heads", options->heads, "Query heads H (a multiple of KVH)")
      ->capture_default_str();
  sub.add_option("--tokens", options->tokens, "Tokens T")->capture_default_str();
  sub.add_option("--queries", options->queries, "Queries Tq (last Tq positions; 0 = none)")
      ->capture_default_str();
  sub.add_option("--head-dim", options->headDim, "Head dim D (even, >= 8)")->capture_default_str();
  sub.add_option("--sequences", options->sequences, "Sequences B (batch axis when > 1)")
      ->capture_default_str();
  sub.add_option("--seed", options->seed, "Seed (same seed, same file)")
      ->capture_default_str()
      ->check(wholeNumberCheck(0, std::numeric_limits<uint64_t>::max()));
  sub.add_option("--dtype", *dtype, "Element type on disk: fp16 or fp32")->capture_default_str();
  sub.add_option("--profile", options->profile,
                 "llama, bias-outlier, qwen2-bias, massive-sinks or low-entropy")->capture_default_str();
  sub.add_option("--model", options->model, "Model name attribute")->capture_default_str();
  sub.add_option("--rope-style", *rope, "half or interleaved")->capture_default_str();
  sub.add_option("--rope-theta", options->ropeTheta, "RoPE base")
      ->capture_default_str()
      ->check(numberCheck("a finite number > 0", [](double v) { return v > 0; }));
  sub.add_flag("--quiet,-q", *quiet, "Print nothing on success");
  return [=]() -> int {
    SynthOptions o = *options;
    if (*dtype == "fp16" || *dtype == "float16")
      o.dtype = DiskType::Float16;
    else if (*dtype == "fp32" || *dtype == "float32")
      o.dtype = DiskType::Float32;
    else
      return fail(Status::invalidArgument("--dtype '" + *dtype + "': expected fp16 or fp32"));
    if (*rope == "half")
      o.ropeStyle = RopeStyle::Half;
    else if (*rope == "interleaved")
      o.ropeStyle = RopeStyle::Interleaved;
    else
      return fail(
          Status::invalidArgument("--rope-style '" + *rope + "': expected half or interleaved"));
    // Many layers take long (docs/reliability.md: about 0.5 s per 1000 small layers): progress.
    Status st = writeSynthDump(*out, o, *quiet ? cancellationProgress() : cliProgress("synth " + *out, true));
    if (!st) return fail(st);
    if (!*quiet)
      std::cout << *out << ": " << o.layers << " layers, " << o.kvHeads << " kv heads, " << o.heads
                << " heads, " << o.tokens << " tokens, " << o.queries << " queries, head dim "
                << o.headDim << ", " << o.sequences << " sequence" << (o.sequences == 1 ? "" : "s")
                << ", " << diskTypeName(o.dtype) << ", profile " << o.profile << ", seed " << o.seed
                << "\n";
    return kExitOk;
  };
}

const Registrar kRegistrar{"synth", "Write a synthetic dump shaped like a real LLM's KV cache",
                           setupSynth};

}  // namespace
}  // namespace kvscope::cli
