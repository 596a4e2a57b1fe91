#!/usr/bin/env bash
# What recording a timeline costs: steps/s of lenet5 on MNIST (batch 64 per rank, 1 thread) at
# 2 ranks with and without --timeline, in one invocation, alternating run by run (the order
# swapped every rep: off-on, on-off, ...) so that drifting machine load hits both alike.
# Prints one JSON line: the medians, their ratio, the median of each rep's on/off ratio, and
# the spread; also what the spans cost by themselves (bench/span_cost.cc: ns per span, times
# the spans a step records, times steps/s), a bound that machine noise cannot blur. Appends
# the line to bench/results/timeline.jsonl.
# Usage: bench/timeline.sh; knobs REPS (9), STEPS (400), ENGINE (mpi), BUILD (build),
# OUT (the JSON lines file), RUN_TIMEOUT (600 s for one run).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-9}
steps=${STEPS:-400}
engine=${ENGINE:-mpi}
distml=${BUILD:-build}/distml
span_cost=${BUILD:-build}/bench/distml_span_cost
ninja -C "${BUILD:-build}" distml_span_cost >/dev/null  # not in the default build
out=${OUT:-bench/results/timeline.jsonl}
run_timeout=${RUN_TIMEOUT:-600}
python=/usr/bin/python3
[[ -d data/mnist ]] || { echo "timeline: needs data/mnist (bash scripts/setup.sh --data)" >&2; exit 2; }
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench 2>/dev/null || echo -dirty)
mkdir -p bench/results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run on|off REP: appends "on|off steps_per_sec" to $work/rates.
run() {
  local extra=() rc=0
  [[ $1 == on ]] && extra=(--timeline "$work/trace.json")
  timeout "$run_timeout" "$distml" train --config examples/mnist_lenet.toml --np 2 \
    --engine "$engine" --set train.max_steps="$steps" --set train.threads=1 \
    --set train.log_every=100 --json "${extra[@]}" >"$work/out" 2>"$work/err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "timeline: run with timeline $1 failed (exit $rc):" >&2
    cat "$work/err" >&2
    exit 1
  fi
  local rate
  rate=$(tail -n 1 "$work/out" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["steps_per_sec"])')
  echo "$1 $rate" >>"$work/rates"
  echo "timeline: rep $2/$reps, timeline $1: $rate steps/s" >&2
}

for ((rep = 1; rep <= reps; rep++)); do
  if ((rep % 2)); then run off "$rep"; run on "$rep"; else run on "$rep"; run off "$rep"; fi
done
[[ -s $work/trace.json ]] || { echo "timeline: no trace written" >&2; exit 1; }
"$span_cost" >"$work/span_cost"

"$python" - "$work/rates" "$commit" "$engine" "$steps" "$work/trace.json" "$work/span_cost" <<'PY' | tee -a "$out"
import datetime, json, statistics, sys
trace = json.load(open(sys.argv[5]))
cost = json.load(open(sys.argv[6]))
rank0 = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
spans_per_step = len(rank0) / sum(e["name"] == "step" for e in rank0)
rates = {"on": [], "off": []}
for line in open(sys.argv[1]):
    kind, rate = line.split()
    rates[kind].append(float(rate))
on, off = rates["on"], rates["off"]
paired = [a / b for a, b in zip(on, off)]
print(json.dumps({
    "bench": "timeline", "date": datetime.date.today().isoformat(), "commit": sys.argv[2],
    "model": "lenet5", "data": "mnist", "np": 2, "engine": sys.argv[3], "batch": 64,
    "steps": int(sys.argv[4]), "reps": len(on),
    "steps_per_sec_off": statistics.median(off), "steps_per_sec_on": statistics.median(on),
    "ratio_of_medians": statistics.median(on) / statistics.median(off),
    "paired_ratio_median": statistics.median(paired),
    "paired_ratio_min": min(paired), "paired_ratio_max": max(paired),
    "off_min": min(off), "off_max": max(off), "on_min": min(on), "on_max": max(on),
    "spans_per_step": spans_per_step, "ns_per_span": cost.get("ns_per_span_on"),
    "ns_per_span_off": cost.get("ns_per_span_off"),
    "span_cost_fraction": (spans_per_step * cost["ns_per_span_on"] * 1e-9 *
                           statistics.median(off) if cost else None)}))
PY
