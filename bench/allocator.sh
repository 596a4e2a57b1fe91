#!/usr/bin/env bash
# glibc malloc's thresholds as distml fixes them against glibc's adaptive defaults
# (docs/benchmarks.md, "Bimodal step times"): DistributedOptimizer and the C++ trainer on lenet5,
# 2 ranks over gloo, 1 thread, batch 64, alternated rep by rep. GLIBC_TUNABLES naming a malloc
# tunable (perturb=0, glibc's default) makes distml leave the allocator alone.
# Usage: bench/allocator.sh [REPS]   (prints steps/s, and page faults a step for Python)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-10}
defaults=glibc.malloc.perturb=0
python_run() {  # [env...]: "steps/s faults/step" of DistributedOptimizer
  env "$@" PYTHONPATH=build/python /usr/bin/python3 bench/ddp_train.py --model lenet5 \
    --impl distml --steps 600 --data data/mnist | tail -1 |
    /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin)
print("%.1f %.0f" % (d["steps_per_sec"], d["page_faults_per_step"]))'
}
cpp_run() {  # [env...]: steps/s of distml train
  env "$@" build/distml train --config examples/mnist_lenet.toml --np 2 --engine gloo \
    --set train.max_steps=620 --set train.threads=1 --set train.batch_size=64 \
    --set optim.lr=0.01 --set optim.schedule=constant --json 2>/dev/null | tail -1 |
    /usr/bin/python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["steps_per_sec"])'
}
echo "rep python_fixed(steps/s faults) python_adaptive(steps/s faults) cpp_fixed cpp_adaptive"
for ((rep = 0; rep < reps; ++rep)); do
  echo "$rep $(python_run) $(python_run GLIBC_TUNABLES=$defaults) $(cpp_run)" \
    "$(cpp_run GLIBC_TUNABLES=$defaults)"
done
