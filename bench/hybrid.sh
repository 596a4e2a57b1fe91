#!/usr/bin/env bash
# The Parallax hybrid against dense all-reduce on an embedding-dominated model: fastText on the
# Bible's verses (examples/bible_fasttext.toml: a 2^18 x 32 table, 66 classes), 4 ranks on the
# mpi engine, the full run per seed, the two strategies alternating seed by seed. Per strategy:
# payload bytes per step (bytes_sent / global_step on rank 0), steps/s, test accuracy; medians
# over the seeds and the ratios (target: >= 10x fewer bytes per step at equal accuracy).
# Appends JSON lines to bench/results/hybrid.jsonl and prints the table.
# Knobs: SEEDS (3), NP (4), EPOCHS (10), BUILD (build), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
np=${NP:-4}
epochs=${EPOCHS:-10}
distml=${BUILD:-build}/distml
out=${OUT:-bench/results/hybrid.jsonl}
run_id=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench tests 2>/dev/null || echo -dirty)
mkdir -p bench/results
[[ -f data/bible/test.npz ]] || { echo "hybrid.sh: data/bible is missing: run make data" >&2; exit 2; }

for ((seed = 1; seed <= seeds; seed++)); do
  for strategy in hybrid allreduce; do
    echo "hybrid: $strategy, seed $seed/$seeds, $np ranks" >&2
    "$distml" train --config examples/bible_fasttext.toml --np "$np" --engine mpi --json \
      --set strategy.name=$strategy --set train.seed=$seed --set train.epochs=$epochs |
      tail -n 1 | jq -ce 'select(.event == "done")' |
      jq -c --arg run "$run_id" --arg commit "$commit" --arg strategy $strategy \
        --argjson np "$np" --argjson seed $seed '{run: $run, commit: $commit,
        strategy: $strategy, np: $np, seed: $seed, bytes_per_step: (.bytes_sent / .global_step),
        steps_per_sec, test_accuracy, test_loss, global_step, wall_s}' | tee -a "$out" >&2
  done
done
/usr/bin/python3 - "$out" "$run_id" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["run"] == sys.argv[2]]
med = {s: {k: statistics.median(r[k] for r in rows if r["strategy"] == s)
           for k in ("bytes_per_step", "steps_per_sec", "test_accuracy")}
       for s in ("hybrid", "allreduce")}
n = sum(1 for r in rows if r["strategy"] == "hybrid")
print(f"| strategy ({rows[0]['np']} ranks, mpi, medians of {n} seeds) | bytes/step | steps/s "
      "| test accuracy |\n| --- | --- | --- | --- |")
for s, m in med.items():
    print(f"| {s} | {m['bytes_per_step']:,.0f} | {m['steps_per_sec']:.1f} | "
          f"{100 * m['test_accuracy']:.2f}% |")
h, a = med["hybrid"], med["allreduce"]
print(f"\nallreduce / hybrid bytes per step: {a['bytes_per_step'] / h['bytes_per_step']:.1f}x "
      f"(target >= 10x); hybrid / allreduce steps/s: {h['steps_per_sec'] / a['steps_per_sec']:.2f}x; "
      f"accuracy difference {100 * (h['test_accuracy'] - a['test_accuracy']):+.2f} points")
PY
