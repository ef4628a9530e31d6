#!/usr/bin/env bash
# Installs the Debian 12 packages kvscope needs that are missing. Used by setup.sh and .ci/run.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config ccache
  libhdf5-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libicu-dev
  libgtest-dev libbenchmark-dev libomp-dev
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev
  xvfb xauth
  python3 python3-numpy python3-h5py
)
if [ "${KVSCOPE_WITH_TORCH:-0}" = 1 ]; then packages+=(python3-torch); fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kvscope: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
