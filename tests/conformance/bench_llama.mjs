// SPDX-License-Identifier: GPL-3.0-or-later
// Test-only: llama.cpp's prompt processing of a token sequence, for `kvscope-cli bench --only
// record --llamacpp tests/conformance` (core/bench/model_workloads.cpp).
//   node bench_llama.mjs MODEL.gguf TOKENS_FILE      prints {"seconds": …, "tokens": …}
// The context uses llama.cpp's defaults (f16 cache, its own thread count); the time is the
// evaluation of every token once, loading excluded.
import fs from "node:fs";
import os from "node:os";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [model, tokensFile] = process.argv.slice(2);
const tokens = fs.readFileSync(tokensFile, "utf8").split(",").map(Number);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const m = await llama.loadModel({modelPath: model});
const size = Math.ceil(tokens.length / 256) * 256;
const ctx = await m.createContext({contextSize: size, batchSize: Math.min(size, 2048), threads: os.cpus().length,
                                   failedCreationRemedy: false, ignoreMemorySafetyChecks: true});
const seq = ctx.getSequence();
const t0 = process.hrtime.bigint();
await seq.evaluateWithoutGeneratingNewTokens(tokens);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
await ctx.dispose();
await m.dispose();
await llama.dispose();
console.log(JSON.stringify({seconds, tokens: tokens.length, threads: os.cpus().length}));
