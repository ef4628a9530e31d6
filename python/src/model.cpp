// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope.record and kvscope.e2e: the adapter to core/model, kept to this file so that a change
// of core/model's API touches only it. Each does what `kvscope-cli record` and `kvscope-cli e2e`
// do (app/cli/cmd_record.cpp, cmd_e2e.cpp) for one input and one setting; e2e returns what
// `e2e --json` prints.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/setting.h"
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "python/src/binding.h"
#include "python/src/dump_handle.h"

namespace kvscope::python {

namespace {

/// kvscope.record: `tokens` (exactly these ids), `text` (the model's tokenizer) or, with
/// neither, BOS followed by `promptTokens` (llama2.c's --prompt-tokens).
void record(const std::string& modelPath, const std::string& out, const std::optional<std::vector<int>>& tokens,
            const std::optional<std::string>& text, const std::vector<int>& promptTokens, const std::optional<int>& steps,
            uint64_t seed, double temperature, const std::string& tokenizer, bool logits, const py::object& progress) {
  if (tokens && tokens->empty()) raise(Status::invalidArgument("--tokens: the list is empty"));
  if ((tokens ? 1 : 0) + (text ? 1 : 0) + (promptTokens.empty() ? 0 : 1) > 1) {
    raise(Status::invalidArgument("give one of tokens=, text= or prompt_tokens="));
  }
  Interrupter interrupter(progress);
  runReleased(interrupter, [&]() -> Status {
    auto model = Model::load(modelPath, tokenizer);
    if (!model) return model.status();
    RecordInput input;
    input.tokens = tokens;
    input.text = text;
    input.promptTokens = promptTokens;
    auto sequence = recordInputTokens(**model, input);
    if (!sequence) return sequence.status();
    RecordOptions options;
    options.tokens = std::move(*sequence);
    auto positions = recordSteps(**model, options.tokens.size(), steps, !tokens && !text);
    if (!positions) return positions.status();
    options.steps = *positions;
    options.seed = seed;
    options.temperature = temperature;
    options.logits = logits;
    auto summary = recordDump(*model, options, out, interrupter.progress());
    if (!summary) return summary.status().withContext(modelPath);
    return Status::ok();
  });
}

std::string e2e(const std::string& modelPath, const DumpHandle& dump, const std::string& key, const std::string& value,
                const std::string& preset, const std::string& engine, int scoreFrom, const py::object& progress) {
  Interrupter interrupter(progress);
  return runReleased(interrupter, [&]() -> Expected<std::string> {
    auto model = Model::load(modelPath);
    if (!model) return model.status();
    const ModelHparams& hp = (*model)->hparams();
    auto r = resolveSetting(SettingText{key, value, preset, engine}, KvShape{hp.headDim, hp.layers, hp.kvHeads});
    if (!r) return r.status();
    E2eSetting setting;
    setting.label = r->label;
    setting.key = r->plans.key;
    setting.value = r->plans.value;
    setting.preset = preset;
    setting.engine = engine;
    setting.querySpec = r->strings.query;  // as the CLI: what the engine's attention does to Q
    E2eOptions options;
    options.scoreFrom = scoreFrom;
    auto results = runE2e(*model, *dump.dump, {setting}, options, interrupter.progress());
    if (!results) return results.status();
    return e2eToJson(results->front());
  });
}

}  // namespace

void bindModel(py::module_& m) {
  m.def("record", &record, py::arg("model"), py::arg("out"), py::arg("tokens") = py::none(),
        py::arg("text") = py::none(), py::arg("prompt_tokens") = std::vector<int>{}, py::arg("steps") = py::none(),
        py::arg("seed") = 0, py::arg("temperature") = 0.0, py::arg("tokenizer") = "", py::arg("logits") = false,
        py::arg("progress") = py::none());
  m.def("e2e", &e2e, py::arg("model"), py::arg("dump"), py::arg("key") = "", py::arg("value") = "",
        py::arg("preset") = "", py::arg("engine") = "", py::arg("score_from") = 0, py::arg("progress") = py::none());
}

}  // namespace kvscope::python
