#!/usr/bin/env bash
# The conformance stage: llama.cpp itself, the CPU build that the npm package node-llama-cpp
# ships (pinned in tests/conformance/package-lock.json), runs GGUF models the test writes, and
# tests/conformance/conformance_test.cpp compares what it computed and stored with kvscope.
#   scripts/conformance.sh [PRESET]     install the npm packages if needed, then run (default release)
#   scripts/conformance.sh --install    only install them (scripts/setup.sh does this)
# Without node and npm the stage is skipped with a message saying so (it needs Node 20).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=tests/conformance

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "kvscope: conformance stage skipped: node and npm are not installed (it runs llama.cpp through" \
       "the npm package node-llama-cpp, which needs Node 20)"
  exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "kvscope: conformance stage skipped: node $(node --version) is older than the Node 20 node-llama-cpp needs"
  exit 0
fi

# Install when node_modules is missing or was installed from another lock file.
stamp="$dir/node_modules/.kvscope-lock"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "kvscope: installing node-llama-cpp for the conformance stage (npm ci)"
  # Only the linux-x64 CPU binaries: the CUDA and Vulkan builds are optional dependencies.
  (cd "$dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
[ "${1:-}" = --install ] && exit 0

preset="${1:-release}"
bin="build/$preset/tests/conformance/kvscope_conformance_test"
if [ ! -x "$bin" ]; then
  echo "kvscope: $bin is missing: build the $preset preset first" >&2
  exit 2
fi
echo "kvscope: conformance stage (llama.cpp $(node -p "require('./$dir/node_modules/node-llama-cpp/package.json').version") through node-llama-cpp)"
KVSCOPE_CONFORMANCE_DIR="$PWD/$dir" "$bin"
