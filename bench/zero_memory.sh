#!/usr/bin/env bash
# What ZeRO's stages save and cost (docs/benchmarks.md, "ZeRO stage 3"), over Open MPI:
# 1. Memory: rank 0's peak resident memory (the done line's peak_rss_mb, from getrusage) for
#    allreduce and zero 1, 2, 3 at 2 and 4 ranks, with Adam on a deep MLP (16 hidden layers of
#    2048, 67 M parameters, 268 MB in float32) on MNIST, 10 steps of 64 rows, the strategies
#    alternated rep by rep. A 1-step run of a 784-10 model gives what the process holds besides
#    the model (LibTorch, MPI, the data set).
# 2. Speed: steps/s of zero 3 against zero 2 on the MLP and LeNet-5 of examples/ (Adam, 300
#    steps, 2 ranks), alternated rep by rep.
# Usage: bench/zero_memory.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-1}
hidden=$(printf '2048,%.0s' {1..16})
run() {  # CONFIG NP STRATEGY STAGE [OVERRIDES...]: "peak_rss_mb steps/s test_accuracy"
  local config=$1 np=$2 strategy=$3 stage=$4
  shift 4
  build/distml train --config "examples/$config.toml" --np "$np" --engine mpi \
    --set strategy.name="$strategy" --set strategy.stage="$stage" --set optim.name=adam \
    --set optim.lr=0.0001 --set optim.schedule=constant "$@" --json 2>/dev/null | tail -1 |
    /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin)
print("%.0f %.2f %.4f" % (d["peak_rss_mb"], d["steps_per_sec"], d["test_accuracy"]))'
}
deep=(--set "model.layers=[784,${hidden}10]" --set train.max_steps=10 --set train.batch_size=64)
for np in 2 4; do
  echo "memory np $np baseline $(run mnist_mlp "$np" allreduce 1 --set 'model.layers=[784,10]' \
    --set optim.name=sgd --set optim.momentum=0 --set train.max_steps=1)"
  for ((rep = 0; rep < reps; ++rep)); do
    echo "memory np $np allreduce $(run mnist_mlp "$np" allreduce 1 "${deep[@]}")"
    for stage in 1 2 3; do
      echo "memory np $np zero$stage $(run mnist_mlp "$np" zero "$stage" "${deep[@]}")"
    done
  done
done
for config in mnist_mlp mnist_lenet; do
  for ((rep = 0; rep < reps; ++rep)); do
    for stage in 2 3; do
      echo "speed $config zero$stage $(run "$config" 2 zero "$stage" --set train.max_steps=300)"
    done
  done
done
