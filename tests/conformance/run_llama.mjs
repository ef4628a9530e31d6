// SPDX-License-Identifier: GPL-3.0-or-later
// Test-only: runs llama.cpp itself (the CPU build node-llama-cpp ships) on the GGUF models the
// conformance test wrote, as the job file says, and writes what llama.cpp computed for the test to
// compare with kvscope (tests/conformance/conformance_test.cpp, scripts/conformance.sh).
//
//   node run_llama.mjs JOB.json
//
// JOB.json: {"runs": [{"id", "model", "tokens": [ids], "kvKey": "F32"|"F16"|"Q8_0"|…, "kvValue",
//                      "flashAttention": bool, "probs": "file", "state": "file"},
//                     {"id", "model", "tokenize": ["text", …], "out": "file.json"}, …]}
// For each evaluation run it writes `probs` (float32 [T, vocab]: P(token | prefix) from the raw
// logits, no sampler), `state` (llama.cpp's llama_state_seq file) and <id>.result.json with
// {"ok", "error", "log"}; a context llama.cpp refuses is ok: false with its own message.
import fs from "node:fs";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const dir = path.dirname(process.argv[2]);
let logLines = [];
const llama = await getLlama({
  gpu: false,
  build: "never",
  logLevel: LlamaLogLevel.warn,
  logger: (level, message) => logLines.push(String(message).trim()),
});

const models = new Map();
async function model(file) {
  if (!models.has(file)) models.set(file, await llama.loadModel({modelPath: file}));
  return models.get(file);
}

for (const run of job.runs) {
  logLines = [];
  console.error(`run ${run.id}`);
  const result = {id: run.id, ok: false, error: null, log: []};
  try {
    const m = await model(run.model);
    if (run.tokenize) {
      // Text exactly as given, no BOS added (node-llama-cpp never adds one); special tokens not parsed.
      const out = run.tokenize.map((text) => Array.from(m.tokenize(text, false)));
      fs.writeFileSync(path.resolve(dir, run.out), JSON.stringify({tokens: out}));
      result.ok = true;
    } else {
      const T = run.tokens.length;
      const ctx = await m.createContext({
        contextSize: Math.ceil(Math.max(T, 1) / 256) * 256,
        batchSize: Math.ceil(Math.max(T, 1) / 256) * 256,
        sequences: 1,
        threads: 2,
        flashAttention: run.flashAttention,
        experimentalKvCacheKeyType: run.kvKey,
        experimentalKvCacheValueType: run.kvValue,
        failedCreationRemedy: false,
        ignoreMemorySafetyChecks: true,
      });
      const seq = ctx.getSequence();
      const items = run.tokens.map((t) => [t, {generateNext: {probabilities: true}}]);
      const out = await seq.controlledEvaluate(items);
      const n = out[0].next.probabilities.size;
      const probs = new Float32Array(T * n);
      out.forEach((o, p) => {
        for (const [token, prob] of o.next.probabilities) probs[p * n + token] = prob;
      });
      fs.writeFileSync(path.resolve(dir, run.probs), Buffer.from(probs.buffer));
      await seq.saveStateToFile(path.resolve(dir, run.state));
      result.vocab = n;
      await ctx.dispose();
      result.ok = true;
    }
  } catch (e) {
    result.error = String(e && e.message ? e.message : e);
  }
  result.log = logLines;
  fs.writeFileSync(path.resolve(dir, `${run.id}.result.json`), JSON.stringify(result));
}
for (const m of models.values()) await m.dispose();
await llama.dispose();
