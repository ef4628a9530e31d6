#!/usr/bin/env bash
# Behaviour check for refactors (docs/architecture.md, "Changing the code without changing what
# it computes"): `kvscope-cli eval --json` of every preset on three dumps (a 256-token
# stories260K recording, a synthetic fp16 dump with D = 128, one with D = 64), written to a
# folder, and compared byte for byte with an earlier run.
#
#   scripts/compare-eval.sh record DIR [CLI]    write DIR/<dump>/<preset>.json (and the dumps, in
#                                               DIR/.dumps)
#   scripts/compare-eval.sh compare DIR [CLI]   run again into a temporary folder, diff with DIR
#
# compare evaluates the dumps that record kept (DIR/.dumps), so a change to how dumps are made
# (record's forward pass, synth) does not show up as a change of eval; a DIR without .dumps
# (recorded before they were kept) gets fresh ones.
# CLI defaults to build/release/app/kvscope-cli. The recording needs
# ../shared/models/stories260K.bin; without it that dump is skipped, and the script says so.
# Exit status: 0 identical, 1 a difference (listed), 2 bad usage or a failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"; dir="${2:-}"; cli="${3:-build/release/app/kvscope-cli}"
if [[ ( "$mode" != record && "$mode" != compare ) || -z "$dir" ]]; then
  echo "usage: scripts/compare-eval.sh record|compare DIR [CLI]" >&2
  exit 2
fi
if [[ ! -x "$cli" ]]; then
  echo "compare-eval: $cli is not an executable (build the release preset first, or name the CLI)" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dumps="$work/dumps"; mkdir -p "$dumps"

# The dumps are made afresh by record (synth is deterministic for a seed, record for a model and
# its forward pass); compare reuses the ones record kept.
if [[ "$mode" == compare && -d "$dir/.dumps" ]]; then
  cp "$dir/.dumps"/*.h5 "$dumps/"
else
  "$cli" synth "$dumps/synth-d128.h5" --layers 2 --kv-heads 2 --heads 4 --tokens 384 --queries 16 \
    --head-dim 128 --dtype fp16 --seed 7 -q
  "$cli" synth "$dumps/synth-d64.h5" --layers 3 --kv-heads 2 --heads 8 --tokens 300 --queries 12 \
    --head-dim 64 --dtype fp16 --seed 11 -q
  model=../shared/models/stories260K.bin
  if [[ -f "$model" ]]; then
    "$cli" record "$model" --out "$dumps/stories260K-256.h5" --steps 256 >/dev/null
  else
    echo "compare-eval: $model not found: the recorded dump is skipped" >&2
  fi
fi

presets=$("$cli" presets --json | python3 -c 'import json,sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["presets"]))')

run_all() {  # $1: output folder
  local out="$1" d name p rc
  for d in "$dumps"/*.h5; do
    name="$(basename "$d" .h5)"
    mkdir -p "$out/$name"
    for p in $presets; do
      # A preset a dump's shape refuses (e.g. a power-of-two rule) records its refusal instead:
      # a refusal that changes is a behaviour change too.
      set +e
      "$cli" eval "$d" --preset "$p" --json - >"$out/$name/$p.json" 2>"$out/$name/$p.err"
      rc=$?
      set -e
      echo "$rc" >"$out/$name/$p.rc"
      # The dumps live in a fresh temporary folder each run: reports name them without it.
      sed -i "s#$dumps/##g" "$out/$name/$p.json"
      [[ ! -f "$out/$name/$p.err" ]] || sed -i "s#$dumps/##g" "$out/$name/$p.err"
      [[ -s "$out/$name/$p.err" ]] || rm -f "$out/$name/$p.err"
    done
  done
}

if [[ "$mode" == record ]]; then
  rm -rf "$dir"; mkdir -p "$dir"
  run_all "$dir"
  mkdir -p "$dir/.dumps" && cp "$dumps"/*.h5 "$dir/.dumps/"
  echo "compare-eval: recorded $(find "$dir" -name '*.json' | wc -l) reports in $dir"
  exit 0
fi

[[ -d "$dir" ]] || { echo "compare-eval: $dir does not exist (run record first)" >&2; exit 2; }
run_all "$work/now"
if diff -r -q --exclude=.dumps "$dir" "$work/now" >"$work/diff.txt"; then
  echo "compare-eval: identical ($(find "$dir" -name '*.json' | wc -l) reports)"
  exit 0
fi
echo "compare-eval: differences:" >&2
sed "s#$work/now#NOW#g" "$work/diff.txt" >&2
exit 1
