#!/usr/bin/env bash
# One command: install what is missing, build, and run every test (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export QT_QPA_PLATFORM=offscreen
cmake --preset release
cmake --build --preset release
ctest --preset release
