#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The scaling row of `kvscope-cli bench` (issue 30) on a many-core machine, in one command:
#   1. kvscope-cli: $KVSCOPE_CLI if set, else a bundle made with --bundle and carried to
#      .perf-bundle/, else built here (the core preset without tests and benchmarks, kvscope-cli only);
#   2. `kvscope-cli bench --only scaling`: the eval workload (4 layers, H 32, Tq 64, KVH 8, T 4096,
#      D 128, int4 g128 on K and V) and the 32-layer Llama-3-8B-shaped dump (T 8192, fp16, 1.6 GB,
#      kivi-2), each generated in $TMPDIR and evaluated at 1, 2, 4, … threads up to all cores;
#      the table goes to the terminal and scaling.txt, the figures to scaling.json;
#   3. while the time budget lasts (SCALING_BUDGET_S, default 420 s from the start): the attention
#      rows (attention.json) and the PyTorch peer comparison on the eval workload at 2 threads and
#      all cores, when that machine's python3 ($PYTHON) has torch (torch_eval_t*.json).
#
#   tests/perf/scaling.sh [--threads N] [--quick]
#   tests/perf/scaling.sh --bundle [DIR]   make DIR (default .perf-bundle) from build/core or
#                                          build/release: kvscope-cli, the libraries it loads and
#                                          the loader, for a machine without the build's packages
#
# OUT (default /tmp) receives the files. Exit status: 0 when the bench ran (whatever its
# verdicts), 2 when no kvscope-cli could be had.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
OUT="${OUT:-/tmp}"
mkdir -p "$OUT"
threads=$(nproc)
quick=()

bundle() {  # $1: target folder
  local dir="${1:-.perf-bundle}" cli=""
  for c in build/core/app/kvscope-cli build/release/app/kvscope-cli; do [[ -x "$c" ]] && { cli="$c"; break; }; done
  [[ -n "$cli" ]] || { echo "scaling.sh: build kvscope-cli first (cmake --preset core && cmake --build --preset core --target kvscope-cli)" >&2; exit 2; }
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$cli" "$dir/kvscope-cli"
  strip "$dir/kvscope-cli" 2>/dev/null || true  # symbols are of no use there; the bundle travels
  ldd "$cli" | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}' | sort -u | while read -r lib; do cp -L "$lib" "$dir/"; done
  echo "scaling.sh: $dir holds $(ls "$dir" | wc -l) files, $(du -sh "$dir" | cut -f1); copy it beside the checkout there"
  exit 0
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle "${2:-}" ;;
    --threads) threads="$2"; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    *) echo "usage: tests/perf/scaling.sh [--threads N] [--quick] | --bundle [DIR]" >&2; exit 2 ;;
  esac
done

# 1. The program.
run_cli=()
if [[ -n "${KVSCOPE_CLI:-}" ]]; then
  run_cli=("$KVSCOPE_CLI")
elif [[ -x .perf-bundle/kvscope-cli ]]; then
  # The carried loader and libraries, whatever this machine's own are. /proc/self/exe is then the
  # loader, so `eval` reads in-process (KVSCOPE_ISOLATE_READS=0 below); the bench always does.
  loader=$(ls .perf-bundle/ld-linux-x86-64.so.* 2>/dev/null | head -1)
  run_cli=("$loader" --library-path "$PWD/.perf-bundle" "$PWD/.perf-bundle/kvscope-cli")
  export KVSCOPE_ISOLATE_READS=0
else
  b0=$(date +%s)
  if cmake --preset core -DKVSCOPE_BUILD_TESTS=OFF -DKVSCOPE_BUILD_BENCHMARKS=OFF > "$OUT/build.log" 2>&1 &&
     cmake --build --preset core --target kvscope-cli -- -j"$(nproc)" >> "$OUT/build.log" 2>&1; then
    echo "scaling.sh: built kvscope-cli in $(( $(date +%s) - b0 )) s"
    run_cli=(build/core/app/kvscope-cli)
  else
    echo "scaling.sh: the build failed (last lines of $OUT/build.log below); make a bundle where it builds" >&2
    echo "  (tests/perf/scaling.sh --bundle) and carry .perf-bundle, or set KVSCOPE_CLI" >&2
    tail -15 "$OUT/build.log" >&2
    exit 2
  fi
fi

{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores online, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); threads up to $threads; $(date -u +%FT%TZ)"
} | tee "$OUT/machine.txt"

# 2. The scaling row.
tmp="${TMPDIR:-/tmp}"
OMP_NUM_THREADS="$threads" "${run_cli[@]}" bench --only scaling "${quick[@]}" --temp-dir "$tmp" \
  --json "$OUT/scaling.json" 2>&1 | grep -v '^bench: ' | tee "$OUT/scaling.txt"
echo "scaling.sh: scaling row done at $(( $(date +%s) - start )) s"

# 3. Extras, while the budget lasts.
budget="${SCALING_BUDGET_S:-420}"
left() { echo $(( budget - ($(date +%s) - start) )); }
if (( $(left) > 60 )); then
  OMP_NUM_THREADS="$threads" "${run_cli[@]}" bench --only attention "${quick[@]}" --json "$OUT/attention.json" 2>&1 \
    | grep -v '^bench: ' | tee "$OUT/attention.txt"
fi
py="${PYTHON:-python3}"
if (( $(left) > 120 )) && "$py" -c 'import torch' 2>/dev/null; then
  for t in $(printf "%s\n" 2 "$threads" | sort -un); do
    (( $(left) > 60 )) || break
    timeout "$(left)" "$py" tests/perf/torch_compare.py --workload eval --threads "$t" "${quick[@]}" \
      --cli-command "${run_cli[*]}" --temp-dir "$tmp" --json "$OUT/torch_eval_t$t.json" 2>&1 | tee -a "$OUT/torch_eval.txt"
  done
fi
echo "scaling.sh: done in $(( $(date +%s) - start )) s; files in $OUT"
exit 0
