#!/usr/bin/env bash
# The user's own models against the built-in ones:
#  1. speed: a TorchScript copy of LeNet-5 (scripted in Python, tests/user_models/make_models.py)
#     against the built-in lenet5 on MNIST at 2 ranks (mpi engine, batch 64, 1 thread), the two
#     alternating rep by rep; median steps/s and their ratio (target >= 0.85);
#  2. accuracy: a scripted CNN with BatchNorm (MnistCnn there) on MNIST as .npz files, one epoch
#     at 2 ranks under allreduce and zero; test accuracy (target >= 97.5%).
# Appends JSON lines to bench/results/user_models.jsonl and prints the tables.
# Knobs: REPS (5), STEPS (300 timed per run), BUILD (build), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-5}
steps=${STEPS:-300}
distml=${BUILD:-build}/distml
out=${OUT:-bench/results/user_models.jsonl}
python=/usr/bin/python3
run_id=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench tests 2>/dev/null || echo -dirty)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p bench/results
"$python" tests/user_models/make_models.py "$work"
"$python" bench/mnist_npz.py "$work"

done_line() { tail -n 1 | jq -ce 'select(.event == "done")'; }
record() {  # bench model np rep: the done line on stdin becomes a result line
  jq -c --arg run "$run_id" --arg commit "$commit" --arg bench "$1" --arg model "$2" \
    --argjson np "$3" --argjson rep "$4" '{run: $run, commit: $commit, bench: $bench,
    model: $model, np: $np, rep: $rep,
    steps_per_sec, test_accuracy, global_step, wall_s}' | tee -a "$out" >&2
}

for ((rep = 1; rep <= reps; rep++)); do
  for model in lenet5 torchscript; do
    echo "user_models: speed, $model, rep $rep/$reps" >&2
    "$distml" train --config examples/mnist_lenet.toml --np 2 --engine mpi --json \
      --set model.name=$model --set model.path="$work/lenet5.pt" \
      --set train.max_steps="$steps" --set optim.schedule=constant | done_line |
      record speed "$model" 2 "$rep"
  done
done
for strategy in allreduce zero; do
  echo "user_models: accuracy, scripted CNN on MNIST .npz, $strategy" >&2
  "$distml" train --config examples/mnist_npz_cnn.toml --np 2 --engine mpi --json \
    --set data.path="$work/mnist_train.npz" --set data.test_path="$work/mnist_test.npz" \
    --set model.path="$work/mnist_cnn.pt" --set strategy.name=$strategy | done_line |
    record accuracy "mnist_cnn/$strategy" 2 1
done
"$python" - "$out" "$run_id" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["run"] == sys.argv[2]]
speed = {m: statistics.median(r["steps_per_sec"] for r in rows
                              if r["bench"] == "speed" and r["model"] == m)
         for m in ("lenet5", "torchscript")}
n = sum(1 for r in rows if r["bench"] == "speed" and r["model"] == "lenet5")
print(f"| model (2 ranks, mpi, batch 64) | steps/s (median of {n}) |\n| --- | --- |")
for m, v in speed.items():
    print(f"| {m} | {v:.1f} |")
print(f"\nTorchScript / built-in: {speed['torchscript'] / speed['lenet5']:.3f} (target >= 0.85)\n")
print("| scripted CNN on MNIST .npz, 1 epoch, 2 ranks | test accuracy |\n| --- | --- |")
for r in rows:
    if r["bench"] == "accuracy":
        print(f"| {r['model'].split('/')[1]} | {100 * r['test_accuracy']:.2f}% |")
PY
