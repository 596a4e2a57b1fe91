#!/usr/bin/env bash
# Python against the C++ trainer and DDP, over gloo, 2 ranks, 1 thread, batch 64, 300 timed
# steps (docs/benchmarks.md, "Python against DDP and the C++ trainer"): DistributedOptimizer,
# the C++ trainer, DDP over gloo and DDP over the distml backend, alternated rep by rep.
# With OTHER_PYTHONPATH set, a fifth column: DDP over distml from that build of the module.
# Usage: bench/python_speed.sh [REPS]   (the first rep is a warm-up; prints steps/s per rep)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-7}
py() {  # py PYTHONPATH ARGS...: ddp_train.py's done line
  PYTHONPATH=$1 /usr/bin/python3 bench/ddp_train.py "${@:2}" --steps 300 --data data/mnist | tail -1
}
echo "model rep distributed_optimizer cpp_trainer ddp_gloo ddp_distml" \
  "${OTHER_PYTHONPATH:+ddp_distml_other}"
for model in mlp lenet5; do
  toml=$([[ $model == mlp ]] && echo mnist_mlp || echo mnist_lenet)
  for ((rep = 0; rep < reps; ++rep)); do
    lines=("$(py build/python --model $model --impl distml)")
    lines+=("$(build/distml train --config examples/$toml.toml --np 2 --engine gloo \
      --set train.max_steps=320 --set train.threads=1 --set train.batch_size=64 \
      --set optim.lr=0.01 --set optim.schedule=constant --json 2>/dev/null | tail -1)")
    lines+=("$(py build/python --model $model --impl ddp --backend gloo)")
    lines+=("$(py build/python --model $model --impl ddp --backend distml)")
    [[ -n ${OTHER_PYTHONPATH:-} ]] &&
      lines+=("$(py "$OTHER_PYTHONPATH" --model $model --impl ddp --backend distml)")
    /usr/bin/python3 -c 'import json, sys
rates = ["%.1f" % json.loads(a)["steps_per_sec"] for a in sys.argv[3:]]
print(sys.argv[1], sys.argv[2], *rates, flush=True)' "$model" "$rep" "${lines[@]}"
  done
done
