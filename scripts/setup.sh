#!/usr/bin/env bash
# Installs what distml needs, only what is missing, then checks that LibTorch multiplies
# matrices through a fast BLAS. Idempotent: a second run installs nothing and takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ pkg-config
  libtorch-dev libopenblas0-openmp
  openmpi-bin libopenmpi-dev
  libgloo-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  # Update the package lists only when they are absent or the install fails on stale ones.
  if ! ls /var/lib/apt/lists/*Packages* >/dev/null 2>&1 ||
     ! "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# LibTorch must multiply through OpenBLAS: Debian's reference BLAS is ~20x slower and
# makes every benchmark meaningless.
tool=build/tools/check_blas
if [[ ! -x $tool || scripts/check_blas.cpp -nt $tool ]]; then
  mkdir -p build/tools
  g++ -std=c++17 -O2 -o "$tool" scripts/check_blas.cpp -ltorch_cpu -lc10
fi
"$tool"
