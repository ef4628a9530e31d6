#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Writes seed corpora for the fuzz targets: scripts/fuzz-seeds.sh [out-dir] (default build/fuzz/seeds)
#   dump/     small dumps from 'kvscope-cli synth' plus the hostile corpus that
#             test_core_reliability generates (valid, truncated, bit-flipped, misshapen ...)
#   mapping/  mapping files, good and bad
#   spec/     spec strings: every preset's K and V spec and one per format and option
#   engine/   engine strings (docs/engines.md): llama.cpp flags, good and refused
#   gguf/ safetensors/   small model files written by test_core_modelfile (ModelfileCorpus.*)
# Needs a normal build with kvscope-cli, test_core_reliability and test_core_modelfile (build/rel
# or $KVSCOPE_BUILD).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/fuzz/seeds}
bin=${KVSCOPE_BUILD:-}
if [ -z "$bin" ]; then
  for b in build/rel build/release build/core; do [ -x "$b/app/kvscope-cli" ] && { bin=$b; break; }; done
fi
[ -n "$bin" ] || { echo "no normal build with kvscope-cli found; set KVSCOPE_BUILD" >&2; exit 2; }
mkdir -p "$out/dump" "$out/mapping" "$out/spec" "$out/engine" "$out/gguf" "$out/safetensors"

# Dumps: synth (shapes kept tiny so libFuzzer's mutations reach the structure, not the data).
cli="$bin/app/kvscope-cli"
n=0
for shape in "--layers 1 --kv-heads 1 --heads 1 --tokens 4 --queries 2 --head-dim 8" \
             "--layers 2 --kv-heads 2 --heads 4 --tokens 8 --head-dim 8 --queries 4" \
             "--layers 1 --kv-heads 1 --heads 2 --tokens 3 --queries 1 --head-dim 8 --dtype fp32"; do
  # shellcheck disable=SC2086
  if "$cli" synth "$out/dump/synth-$n.h5" $shape >/dev/null 2>&1; then n=$((n + 1)); fi
done
echo "dump: $n synth seeds"
if [ -x "$bin/tests/test_core_reliability" ]; then
  KVSCOPE_RELIABILITY_CORPUS_OUT="$(realpath "$out/dump")" \
    "$bin/tests/test_core_reliability" --gtest_filter='HostileDumps.EveryCase*' >/dev/null || true
fi
echo "dump: $(ls "$out/dump" | wc -l) seeds in all"

# Mappings.
m="$out/mapping"
cat >"$m/stacked.json" <<'JSON'
{"key": {"path": "/past_key_values/key", "axes": "layer,batch,head,token,dim"},
 "value": {"path": "/past_key_values/value", "axes": "layer,batch,head,token,dim"},
 "model": "gpt2", "rope_theta": 10000, "rope_style": "half", "softmax_scale": 0.125}
JSON
cat >"$m/per_layer.json" <<'JSON'
{"key": {"path": "/model/layers/{layer}/k", "axes": ["head", "token", "dim"]},
 "value": {"path": "/model/layers/{layer}/v", "axes": ["head", "token", "dim"]},
 "query": {"path": "/model/layers/{layer}/q", "axes": ["token", "head", "dim"]},
 "key_pre_rope": null, "layers": 12}
JSON
printf '{"key": {"path": "/k", "axes": "layer,head,token,dim"}, "value": {"path": "/v", "axes": "layer,token,head,dim"}, "query": {"path": "/q/{layer}", "axes": "batch,head,token,dim"}, "key_pre_rope": {"path": "/kp", "axes": "layer,head,token,dim"}}' >"$m/all_tensors.json"
printf '{"key": {"path": "/k", "axes": "head,token"}}' >"$m/bad_axes.json"
printf '{"key": ' >"$m/truncated.json"
printf '[1, 2, {"key": null}]' >"$m/array.json"
echo "mapping: $(ls "$m" | wc -l) seeds"

# Spec strings, one per file.
s="$out/spec"
i=0
while IFS= read -r spec; do
  [ -n "$spec" ] || continue
  printf '%s' "$spec" >"$s/spec-$i.txt"
  i=$((i + 1))
done <<'SPECS'
int4
int2,axis=channel,group=32,residual=128
int2,axis=token,group=32,residual=128
int4,prerope,axis=channel,outliers=0.01,sinks=1
int3,axis=token,outliers=0.01
int4,rot=hadamard,axis=token,group=128
int8,sym,axis=head,clip=0.999
int1
int5,axis=tensor,clip=mse,scale=fp32
fp8_e4m3
fp8_e4m3,unitscale
fp8_e5m2,axis=token,scale=bf16
nf4
nf4,group=128,clip=0.99
mxfp4
nvfp4,sinks=4,residual=16
q8_0
q4_0
q4_1
q5_0
q5_1
iq4_nl
fp16
bf16
none
int4,sinks=0,residual=0,group=0,outliers=0
SPECS
echo "spec: $i seeds"

# Engine strings, one per file.
e="$out/engine"
i=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  printf '%s' "$line" >"$e/engine-$i.txt"
  i=$((i + 1))
done <<'ENGINES'
llama.cpp
llama.cpp -ctk q4_0 -ctv q8_0
llama-server --cache-type-k=q5_1 --cache-type-v q5_0 -fa on
LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk iq4_nl -ctv q4_1 -fa auto
LLAMA_ARG_CACHE_TYPE_K=q8_0 LLAMA_ARG_FLASH_ATTN=off llama-cli -m 'my model.gguf' -c 4096 -ngl 99 -ctk f32 -ctv bf16
llama.cpp -fa off -ctv q4_0
llama.cpp --cache-type-k q3_K
vllm --kv-cache-dtype fp8
ENGINES
echo "engine: $i seeds"

# Model files: the writers of tests/support, through the corpus test.
if [ -x "$bin/tests/test_core_modelfile" ]; then
  KVSCOPE_MODELFILE_CORPUS_OUT="$(realpath "$out")" \
    "$bin/tests/test_core_modelfile" --gtest_filter='ModelfileCorpus.*' >/dev/null || true
fi
echo "gguf: $(ls "$out/gguf" | wc -l) seeds, safetensors: $(ls "$out/safetensors" | wc -l) seeds"
