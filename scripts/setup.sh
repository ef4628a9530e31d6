#!/usr/bin/env bash
# One command: install what is missing, build, and open the GUI on the built-in sample dump.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/conformance.sh --install  # llama.cpp for the tests (skipped, with a message, without Node)
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/app/kvscope "$@"
