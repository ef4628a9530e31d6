#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs one libFuzzer target for N seconds: scripts/fuzz.sh <dump|mapping|spec|engine|gguf|safetensors|tokenize> [seconds] [jobs]
# (extra libFuzzer flags in $FUZZ_FLAGS).
# Builds it with the 'fuzz' preset (clang, ASan + UBSan), seeds it from scripts/fuzz-seeds.sh,
# keeps the growing corpus in build/fuzz/corpus/<target> and crash inputs in
# build/fuzz/artifacts/<target>/. A crash input worth keeping goes to
# tests/fuzz/regressions/<target>/, which the normal build's test_core_reliability replays.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh <dump|mapping|spec|engine|gguf|safetensors|tokenize> [seconds] [jobs]}
seconds=${2:-60}
jobs=${3:-1}
case "$target" in dump|mapping|spec|engine|gguf|safetensors|tokenize) ;; *) echo "unknown target '$target' (dump, mapping, spec, engine, gguf, safetensors, tokenize)" >&2; exit 2 ;; esac

build=build/fuzz
[ -f "$build/build.ninja" ] || cmake --preset fuzz >/dev/null
# FUZZ_NO_BUILD=1 runs the binary as it is (long runs while others change core).
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || ninja -C "$build" -j2 "fuzz_$target" >/dev/null
[ -d "$build/seeds/$target" ] || scripts/fuzz-seeds.sh "$build/seeds"
mkdir -p "$build/corpus/$target" "$build/artifacts/$target" "tests/fuzz/regressions/$target"

dict=()
[ -f "tests/fuzz/$target.dict" ] && dict=(-dict="tests/fuzz/$target.dict")
# Bounded memory is part of the contract: an input that makes kvscope allocate more than
# 2 GiB in one go (or hold more than 2.5 GiB) is a finding, reported as a crash.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# HDF5 1.10 leaks a few KiB on some error paths of corrupt files; that is HDF5's, not ours.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
# shellcheck disable=SC2086
exec "$build/tests/fuzz/fuzz_$target" "${dict[@]}" ${FUZZ_FLAGS:-} -max_total_time="$seconds" -timeout=20 \
  -rss_limit_mb=2560 -malloc_limit_mb=2048 -print_final_stats=1 "${parallel[@]}" \
  -artifact_prefix="$build/artifacts/$target/" \
  "$build/corpus/$target" "$build/seeds/$target" tests/fuzz/regressions/"$target"
