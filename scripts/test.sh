#!/usr/bin/env bash
# One command: install what is missing, build, and run every test (what CI runs).
#   scripts/test.sh               release build + every test and the llama.cpp conformance stage
#                                 (the quick local default)
#   scripts/test.sh --with-asan   then also the asan preset (AddressSanitizer + UBSan, Debug)
#                                 with every test, GUI included; on by default when CI=true
#   scripts/test.sh --no-asan     never the asan stage, even on CI
# The sanitizer options (fatal UBSan, leak checking, suppressions) live in the asan test preset
# of CMakePresets.json, so `ctest --preset asan` alone does the same; docs/reliability.md
# ("Sanitizers") says what runs where and why.
set -euo pipefail
cd "$(dirname "$0")/.."

asan=0
if [ "${CI:-}" = true ]; then asan=1; fi
for arg in "$@"; do
  case "$arg" in
    --with-asan) asan=1 ;;
    --no-asan) asan=0 ;;
    *) echo "usage: scripts/test.sh [--with-asan|--no-asan]" >&2; exit 2 ;;
  esac
done

scripts/deps.sh
export QT_QPA_PLATFORM=offscreen
cmake --preset release
cmake --build --preset release
ctest --preset release
# llama.cpp itself against kvscope (docs/real-models.md, "Checked against llama.cpp").
scripts/conformance.sh release

if [ "$asan" = 1 ]; then
  echo "kvscope: asan stage (AddressSanitizer + UBSan, Debug, GUI included)"
  cmake --preset asan
  cmake --build --preset asan
  # A test that fails is run once more before the stage fails: LeakSanitizer's stop-the-world
  # tracer itself crashes now and then at a loaded process's exit ("Tracer caught signal 11",
  # every test function passed, no report; docs/reliability.md "Sanitizers"). A real finding
  # fails both runs; ctest's output keeps the first failure.
  ctest --preset asan --repeat until-pass:2
fi
