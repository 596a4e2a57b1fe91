#!/usr/bin/env bash
# Pipeline parallelism (parallel.pipeline_stages):
#  1. speed: a deep MLP (784, six 1024-wide layers, 10) in 2 stages x 8 micro-batches of 128
#     (global batch 1024, 1f1b and gpipe) against one rank on the same global batch, both as
#     the same 8 micro-batches (train.accumulate = 8: the same matrix shapes) and as one
#     batch; all runs alternate rep by rep, 1 thread per rank, mpi engine. Median steps/s, the
#     speed-up over one rank and its share of the bubble model's ideal p*m/(m+p-1) (target
#     >= 85%), and each stage's peak activation bytes under each schedule;
#  2. accuracy: the 784-1024-512-10 MLP on MNIST for 2 epochs (lr 0.2, cosine) under gpipe and
#     1f1b at 2 stages, a 2 x 2 grid (2 replicas x 2 stages) and 2 tensor-parallel ranks,
#     beside plain allreduce at 2 ranks (target >= 97% each); and for 10 epochs at the
#     example's lr, 1f1b against pipedream, pipedream + spectrain and ddg (target: within
#     0.5 points of 1f1b; ACCURACY="1f1b_10 pipedream_10 spectrain_10 ddg_10", not in the
#     default).
#  3. memory: each stage's peak resident memory, from the operating system (getrusage in each
#     rank's process), under gpipe and 1f1b, for activations that outweigh the parameters
#     (784-2048-2048-10, global batch 8192 in 64 micro-batches of 128, 3 steps).
# Appends JSON lines to bench/results/pipeline.jsonl and prints the tables.
# Knobs: PARTS ("speed accuracy memory"), ACCURACY ("allreduce gpipe 1f1b grid tensor"), REPS (5),
# STEPS (20 timed per speed run), BUILD (build), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=${PARTS:-speed accuracy memory}
reps=${REPS:-5}
steps=${STEPS:-20}
distml=${BUILD:-build}/distml
out=${OUT:-bench/results/pipeline.jsonl}
run_id=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench tests 2>/dev/null || echo -dirty)
mkdir -p bench/results

done_line() { tail -n 1 | jq -ce 'select(.event == "done")'; }
record() {  # bench case np rep: the done line on stdin becomes a result line
  jq -c --arg run "$run_id" --arg commit "$commit" --arg bench "$1" --arg case "$2" \
    --argjson np "$3" --argjson rep "$4" '{run: $run, commit: $commit, bench: $bench,
    case: $case, np: $np, rep: $rep, steps_per_sec, test_accuracy, global_step, wall_s,
    per_stage: (.pipeline.per_stage // [])}' | tee -a "$out" >&2
}

deep='[784,1024,1024,1024,1024,1024,1024,10]'
speed_args=(--config examples/mnist_mlp.toml --engine mpi --json --set model.layers=$deep
  --set train.batch_size=1024 --set train.max_steps="$steps" --set optim.schedule=constant)
declare -A speed_cases=(
  [one_rank_micro]="--np 1 --set train.batch_size=128 --set train.accumulate=8"
  [one_rank_whole]="--np 1"
  [1f1b]="--np 2 --set parallel.pipeline_stages=2 --set parallel.micro_batches=8"
  [gpipe]="--np 2 --set parallel.pipeline_stages=2 --set parallel.micro_batches=8 --set parallel.schedule=gpipe"
)
[[ $parts == *speed* ]] || reps=0
for ((rep = 1; rep <= reps; rep++)); do
  for c in one_rank_micro one_rank_whole 1f1b gpipe; do
    echo "pipeline: speed, $c, rep $rep/$reps" >&2
    # shellcheck disable=SC2086  # the case's words on purpose
    "$distml" train "${speed_args[@]}" ${speed_cases[$c]} | done_line |
      record speed "$c" "$([[ $c == one_rank* ]] && echo 1 || echo 2)" "$rep"
  done
done
read -ra accuracy_cases <<<"${ACCURACY:-allreduce gpipe 1f1b grid tensor}"
[[ $parts == *accuracy* ]] || accuracy_cases=()
for name in "${accuracy_cases[@]}"; do
  np=2 args=(--set train.epochs=2 --set optim.lr=0.2)
  case $name in
    allreduce) ;;
    gpipe) args+=(--set parallel.pipeline_stages=2 --set parallel.schedule=gpipe) ;;
    1f1b) args+=(--set parallel.pipeline_stages=2) ;;
    grid) np=4 args+=(--set parallel.pipeline_stages=2) ;;
    tensor) args+=(--set parallel.tensor=2) ;;
    # 10 epochs at the example's lr: the asynchronous schedules against 1f1b.
    1f1b_10) args=(--set parallel.pipeline_stages=2) ;;
    pipedream_10) args=(--set parallel.pipeline_stages=2 --set parallel.schedule=pipedream) ;;
    spectrain_10) args=(--set parallel.pipeline_stages=2 --set parallel.schedule=pipedream
                        --set parallel.spectrain=true) ;;
    ddg_10) args=(--set parallel.pipeline_stages=2 --set parallel.schedule=ddg) ;;
    *) echo "pipeline.sh: unknown accuracy case $name" >&2; exit 2 ;;
  esac
  echo "pipeline: accuracy, $name at $np ranks" >&2
  "$distml" train --config examples/mnist_mlp.toml --engine mpi --np "$np" --json "${args[@]}" |
    done_line | record accuracy "$name" "$np" 1
done
if [[ $parts == *memory* ]]; then
  for schedule in gpipe 1f1b; do
    echo "pipeline: memory, $schedule" >&2
    "$distml" train --config examples/mnist_mlp.toml --engine mpi --np 2 --json \
      --set 'model.layers=[784,2048,2048,10]' --set train.batch_size=8192 \
      --set train.max_steps=3 --set parallel.pipeline_stages=2 --set parallel.micro_batches=64 \
      --set parallel.schedule=$schedule | done_line | record memory "$schedule" 2 1
  done
fi
/usr/bin/python3 - "$out" "$run_id" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["run"] == sys.argv[2]]
speed = {r["case"]: [] for r in rows if r["bench"] == "speed"}
for r in rows:
    if r["bench"] == "speed":
        speed[r["case"]].append(r)
med = {c: statistics.median(r["steps_per_sec"] for r in rs) for c, rs in speed.items()}
p, m = 2, 8
ideal = p * m / (m + p - 1)
if speed:
    print(f"| case (global batch 1024) | ranks | steps/s (median of {len(speed['1f1b'])}) "
          "| speed-up over one rank (8 micro-batches) | share of ideal {:.2f} |".format(ideal))
    print("| --- | --- | --- | --- | --- |")
    for c in ("one_rank_micro", "one_rank_whole", "1f1b", "gpipe"):
        up = med[c] / med["one_rank_micro"]
        print(f"| {c} | {1 if c.startswith('one') else 2} | {med[c]:.2f} | {up:.2f} | {up / ideal:.2f} |")
    print("\n| schedule | stage | peak micro-batches held | peak activation bytes |\n| --- | --- | --- | --- |")
    for c in ("gpipe", "1f1b"):
        for s in speed[c][0]["per_stage"]:
            print(f"| {c} | {s['stage']} | {s['peak_micro_batches']:.0f} | {s['peak_activation_bytes']:.0f} |")
memory = [r for r in rows if r["bench"] == "memory"]
if memory:
    print("\n| schedule (64 micro-batches) | stage | peak resident MiB | peak micro-batches held "
          "| peak activation MiB (the stage's count) |\n| --- | --- | --- | --- | --- |")
    for r in memory:
        for s in r["per_stage"]:
            print(f"| {r['case']} | {s['stage']} | {s['peak_rss_mb']:.0f} | "
                  f"{s['peak_micro_batches']:.0f} | {s['peak_activation_bytes'] / 2**20:.0f} |")
print("\n| MNIST mlp (2 epochs; the *_10 cases 10) | ranks | test accuracy |\n| --- | --- | --- |")
for r in rows:
    if r["bench"] == "accuracy":
        print(f"| {r['case']} | {r['np']} | {100 * r['test_accuracy']:.2f}% |")
PY
