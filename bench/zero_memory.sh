#!/usr/bin/env bash
# What ZeRO's stages save (docs/benchmarks.md, "ZeRO-3: memory per rank"): rank 0's peak
# resident memory (the done line's peak_rss_mb, from getrusage) for allreduce and zero 1, 2, 3
# at 2 and 4 ranks over Open MPI, with Adam on a deep MLP (16 hidden layers of 2048, 67 M
# parameters, 268 MB in float32) on MNIST, 10 steps of 64 rows. The strategies alternate rep by
# rep; the same run without a step (train.max_steps = 0 is refused, so 1 step of plain SGD
# without momentum on a 10-wide model) gives what the process holds besides the model.
# Usage: bench/zero_memory.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-1}
hidden=$(printf '2048,%.0s' {1..16})
run() {  # NP STRATEGY STAGE [OVERRIDES...]: "peak_rss_mb test_accuracy"
  local np=$1 strategy=$2 stage=$3
  shift 3
  build/distml train --config examples/mnist_mlp.toml --np "$np" --engine mpi \
    --set strategy.name="$strategy" --set strategy.stage="$stage" \
    --set "model.layers=[784,${hidden}10]" --set optim.name=adam --set optim.lr=0.0001 \
    --set optim.schedule=constant --set train.max_steps=10 --set train.batch_size=64 "$@" \
    --json 2>/dev/null | tail -1 | /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin)
print("%.0f %.4f" % (d["peak_rss_mb"], d["test_accuracy"]))'
}
for np in 2 4; do
  echo "$np baseline 0 $(run "$np" allreduce 1 --set 'model.layers=[784,10]' --set optim.name=sgd \
    --set optim.momentum=0 --set train.max_steps=1)"
  for ((rep = 0; rep < reps; ++rep)); do
    echo "$np allreduce $rep $(run "$np" allreduce 1)"
    for stage in 1 2 3; do echo "$np zero$stage $rep $(run "$np" zero "$stage")"; done
  done
done
