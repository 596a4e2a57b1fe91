#!/usr/bin/env bash
# train.precision = "bf16" against "fp32" (docs/benchmarks.md, "bf16 mixed precision"): LeNet-5
# and the MLP of examples/, 2 epochs on MNIST at 2 ranks over Open MPI, 1 thread each, the two
# precisions alternated rep by rep. Prints each run's steps/s and test accuracy, then medians.
# Usage: bench/precision.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-2}
run() {  # CONFIG PRECISION: "steps/s accuracy"
  build/distml train --config "examples/$1.toml" --np 2 --engine mpi --set train.epochs=2 \
    --set train.precision="$2" --json 2>/dev/null | tail -1 |
    /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin)
print("%.2f %.4f" % (d["steps_per_sec"], d["test_accuracy"]))'
}
for model in mnist_lenet mnist_mlp; do
  for ((rep = 0; rep < reps; ++rep)); do
    for precision in fp32 bf16; do echo "$model $precision $rep $(run "$model" "$precision")"; done
  done
done | tee /dev/stderr | /usr/bin/python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    model, precision, _, sps, acc = line.split()
    runs.setdefault((model, precision), []).append((float(sps), float(acc)))
for model in sorted({m for m, _ in runs}):
    f, b = runs[(model, "fp32")], runs[(model, "bf16")]
    med = lambda r, i: statistics.median(x[i] for x in r)
    print(f"{model}: steps/s fp32 {med(f, 0):.1f} bf16 {med(b, 0):.1f} (bf16/fp32 "
          f"{med(b, 0) / med(f, 0):.2f}); accuracy fp32 {100 * med(f, 1):.2f}% "
          f"bf16 {100 * med(b, 1):.2f}% ({100 * (med(b, 1) - med(f, 1)):+.2f} points)")
'
