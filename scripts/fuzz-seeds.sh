#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Writes seed corpora for the fuzz targets: scripts/fuzz-seeds.sh [out-dir] (default build/fuzz/seeds)
#   dump/     small dumps from 'kvscope-cli synth' plus the hostile corpus that
#             test_core_reliability generates (valid, truncated, bit-flipped, misshapen ...)
#   mapping/  mapping files, good and bad
#   spec/     spec strings: every preset's K and V spec and one per format and option
#   engine/   engine strings (docs/engines.md): llama.cpp flags, good and refused
#   gguf/ safetensors/   small model files written by test_core_modelfile (ModelfileCorpus.*)
#   tokenize/ a mode byte, then a text (fixed llama / gpt2 vocabularies), a tokenizer.json or a
#             GGUF vocabulary as lines (tests/fuzz/fuzz_entries.h, fuzzTokenizer)
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
mkdir -p "$out/dump" "$out/mapping" "$out/spec" "$out/engine" "$out/gguf" "$out/safetensors" "$out/tokenize"

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

# Tokenizer inputs: texts for the fixed llama (mode 0) and gpt2 vocabularies (modes 1, 5, 9,
# 13, 17: one per pre-tokenizer), tokenizer.json files (mode 2) and GGUF vocabularies (mode 3).
k="$out/tokenize"
i=0
for mode in '\x00' '\x01' '\x05' '\x09' '\x0d' '\x11'; do
  for text in 'Hello world' "it's IT'S 12345 a  b\n\nc" ' hello\t\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80!' \
              '<s>x</s><|endoftext|>' '\xe2\x96\x81a \xc2\x85\xc2\x85b'; do
    printf "$mode$text" >"$k/text-$i.bin"
    i=$((i + 1))
  done
done
printf '\x02{"model": {"type": "BPE", "vocab": {"<s>": 0, "\xe2\x96\x81": 1, "H": 2, "i": 3, "Hi": 4, "\xe2\x96\x81Hi": 5, "<0xC3>": 6}, "merges": [["H", "i"], ["\xe2\x96\x81", "Hi"]], "byte_fallback": true, "unk_token": null}, "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\xe2\x96\x81"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\xe2\x96\x81"}]}, "added_tokens": [{"id": 0, "content": "<s>", "special": true, "normalized": false}], "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}, "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\xe2\x96\x81"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}' >"$k/json-legacy.bin"
printf '\x06{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\xc4\xa0": 3, "\xc4\xa0ab": 4}, "merges": ["a b", "\xc4\xa0 ab"], "ignore_merges": true}, "normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:\x27s|\x27t)|\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}, "decoder": {"type": "ByteLevel"}, "added_tokens": [{"id": 5, "content": "<|im_start|>", "special": true, "normalized": false, "lstrip": true}]}' >"$k/json-bytelevel.bin"
printf '\x0a{"model": {"type": "BPE", "vocab": {"\xe2\x96\x81": 0, "a": 1}, "merges": []}, "pre_tokenizer": {"type": "Metaspace", "replacement": "\xe2\x96\x81", "prepend_scheme": "first", "split": true}, "decoder": {"type": "Metaspace", "replacement": "\xe2\x96\x81"}}' >"$k/json-metaspace.bin"
printf '\x03gpt2\nllama-bpe\na\nb\nab\n\xc4\xa0\nm a b\nc <|begin_of_text|>\nu <tool>' >"$k/gguf-gpt2.bin"
printf '\x03llama\n\n<unk>\n<s>\n</s>\n\xe2\x96\x81\na\n\xe2\x96\x81a\n<0x0A>' >"$k/gguf-llama.bin"
echo "tokenize: $(ls "$k" | wc -l) seeds"
