// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope.record and kvscope.e2e: the adapter to core/model, kept to this file (core/model is being
// reworked for GGUF and Hugging Face models; only this file follows it). Each does what
// `kvscope-cli record` and `kvscope-cli e2e` do (app/cli/cmd_record.cpp, cmd_e2e.cpp) for one
// setting, and e2e returns what `e2e --json` prints.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/command/eval_request.h"
#include "core/engine/setting.h"
#include "core/model/checkpoint.h"
#include "core/model/e2e.h"
#include "core/model/record.h"
#include "python/src/binding.h"
#include "python/src/dump_handle.h"

namespace kvscope::python {

namespace {

void record(const std::string& modelPath, const std::string& out, const std::vector<int>& tokens,
            const py::object& steps, uint64_t seed, double temperature, const std::string& tokenizer,
            const py::object& progress) {
  const bool defaultSteps = steps.is_none();  // read with the GIL held
  const int given = defaultSteps ? 0 : steps.cast<int>();
  Interrupter interrupter(progress);
  runReleased(interrupter, [&]() -> Status {
    auto model = Checkpoint::load(modelPath);
    if (!model) return model.status();
    RecordOptions options;
    // As the CLI: the default never exceeds a small model's context; steps given are checked by core.
    options.steps = defaultSteps ? std::min(256, (*model)->config().seqLen) : given;
    options.seed = seed;
    options.temperature = temperature;
    options.tokenizerPath = tokenizer;
    options.promptTokens = tokens;
    auto rec = recordSequence(*model, options, interrupter.progress());
    if (!rec) return rec.status().withContext(modelPath);
    return writeRecording(out, *rec, interrupter.progress());
  });
}

std::string e2e(const std::string& modelPath, const DumpHandle& dump, const std::string& key,
                const std::string& value, const std::string& preset, const std::string& engine,
                const py::object& progress) {
  Interrupter interrupter(progress);
  return runReleased(interrupter, [&]() -> Expected<std::string> {
    auto model = Checkpoint::load(modelPath);
    if (!model) return model.status();
    const ModelConfig& cfg = (*model)->config();
    auto resolved = resolveSetting(SettingText{key, value, preset, engine}, KvShape{cfg.headDim(), cfg.layers, cfg.kvHeads});
    if (!resolved) return resolved.status();
    auto rec = readRecording(*dump.dump, interrupter.progress());
    if (!rec) return rec.status();
    auto baseline = e2eBaseline(*model, *rec, interrupter.progress());
    if (!baseline) return baseline.status().withContext(dump.dump->info().path);
    auto r = runE2e(*model, *rec, *baseline, resolved->plans.key, resolved->plans.value, interrupter.progress());
    if (!r) return r.status().withContext(resolved->label.empty() ? dump.dump->info().path : resolved->label);
    if (!preset.empty()) r->preset = preset;
    if (!engine.empty()) r->engine = engine;
    return e2eToJson(*r);
  });
}

}  // namespace

void bindModel(py::module_& m) {
  m.def("record", &record, py::arg("model"), py::arg("out"), py::arg("tokens") = std::vector<int>{},
        py::arg("steps") = py::none(), py::arg("seed") = 0, py::arg("temperature") = 0.0,
        py::arg("tokenizer") = "", py::arg("progress") = py::none());
  m.def("e2e", &e2e, py::arg("model"), py::arg("dump"), py::arg("key") = "", py::arg("value") = "",
        py::arg("preset") = "", py::arg("engine") = "", py::arg("progress") = py::none());
}

}  // namespace kvscope::python
