#!/usr/bin/env bash
# The pipeline cost model's prediction against the measured step time: `distml plan
# --measure` on the deep MLP of bench/pipeline.sh (784, six 1024-wide layers, 10; global batch
# 1024 in 8 micro-batches, 1 thread per rank, mpi engine) at 2 and 4 stages, REPS times each,
# alternating. Each run measures the layers and the link, plans, then trains the plan for 30
# steps. Target: predicted within 15% of measured (median of the reps).
# Appends JSON lines to bench/results/plan.jsonl and prints the table.
# Knobs: STAGES ("2 4"), SCHEDULES ("1f1b"; also gpipe, pipedream, ddg), REPS (3),
# BUILD (build), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-3}
distml=${BUILD:-build}/distml
out=${OUT:-bench/results/plan.jsonl}
run_id=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench 2>/dev/null || echo -dirty)
mkdir -p bench/results
for rep in $(seq 1 "$reps"); do
  for schedule in ${SCHEDULES:-1f1b}; do
    for stages in ${STAGES:-2 4}; do
      echo "plan: $schedule, $stages stages, rep $rep/$reps" >&2
      "$distml" plan --config examples/mnist_mlp.toml --engine mpi --np "$stages" --json \
        --stages "$stages" --micro-batches 8 --measure \
        --set 'model.layers=[784,1024,1024,1024,1024,1024,1024,10]' \
        --set train.batch_size=1024 --set train.threads=1 --set parallel.schedule="$schedule" |
        tail -n 1 |
        jq -c --arg run "$run_id" --arg commit "$commit" --arg schedule "$schedule" \
          --argjson stages "$stages" --argjson rep "$rep" '{run: $run, commit: $commit,
          schedule: $schedule, stages: $stages, rep: $rep, partition: .chosen.partition,
          predicted_step_s: .chosen.predicted_step_s, measured_step_s,
          prediction_error}' | tee -a "$out" >&2
    done
  done
done
/usr/bin/python3 - "$out" "$run_id" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["run"] == sys.argv[2]]
print("| schedule | stages | partition | predicted step (s) | measured step (s) | error (median) | errors |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for schedule, s in sorted({(r.get("schedule", "1f1b"), r["stages"]) for r in rows}):
    rs = [r for r in rows if r.get("schedule", "1f1b") == schedule and r["stages"] == s]
    med = lambda k: statistics.median(r[k] for r in rs)
    errs = ", ".join(f"{100 * r['prediction_error']:+.1f}%" for r in rs)
    print(f"| {schedule} | {s} | {rs[-1]['partition']} | {med('predicted_step_s'):.4f} | "
          f"{med('measured_step_s'):.4f} | {100 * med('prediction_error'):+.1f}% | {errs} |")
PY
