#!/usr/bin/env bash
# Training speed of distml against PyTorch DDP (gloo, CPU; bench/ddp_train.py) on the same
# models, batch per rank and threads: lenet5 at batch 64 and mlp at batch 128, at 2 and 1
# ranks; distml over the mpi engine and over the gloo engine (DDP's transport: like against
# like), all three alternating rep by rep so that drifting machine load hits them alike.
# Appends one JSON line per run to bench/results/train_speed.jsonl and prints a table per case.
# Usage: bench/train_speed.sh [--reps N]; knobs REPS (3), STEPS (300 timed), WARMUP (20),
# BUILD (build), NPS ("2 1"), OUT (the JSON lines file), RUN_TIMEOUT (600 s for one run).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-3}
if [[ ${1:-} == --reps ]]; then
  reps=${2:?--reps needs a value}
  shift 2
fi
[[ $# -eq 0 ]] || { echo "usage: $0 [--reps N]" >&2; exit 2; }
steps=${STEPS:-300}
warmup=${WARMUP:-20}
distml=${BUILD:-build}/distml
out=${OUT:-bench/results/train_speed.jsonl}
python=/usr/bin/python3
run_timeout=${RUN_TIMEOUT:-600}  # a hung run fails the benchmark instead of stalling it
command -v jq >/dev/null || { echo "train_speed: needs jq" >&2; exit 2; }
run_id=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench 2>/dev/null || echo -dirty)
mkdir -p bench/results
stdout_file=$(mktemp bench/results/train_speed.XXXXXX.tmp)
stderr_file=$(mktemp bench/results/train_speed.XXXXXX.tmp)
trap 'rm -f "$stdout_file" "$stderr_file"' EXIT

# Prints the command's stderr and exits when it failed or its last stdout line is no done event.
check_done() {
  local rc=$1 what=$2
  if [[ $rc -ne 0 ]] || ! tail -n 1 "$stdout_file" | jq -e '.event == "done"' >/dev/null 2>&1; then
    echo "train_speed: $what failed (exit $rc); its stderr and last stdout lines:" >&2
    cat "$stderr_file" >&2
    tail -n 5 "$stdout_file" >&2
    exit 1
  fi
}

run_distml() {  # model batch np engine
  # train.eval_every has no "never" (it must be >= 0), but evaluation is left out of
  # steps_per_sec, which covers all max_steps steps: distml's warm-up steps are timed too.
  local config=examples/mnist_${1/lenet5/lenet}.toml rc=0
  local cmd=(timeout "$run_timeout" "$distml" train --config "$config" --np "$3" --engine "$4"
             --set train.max_steps=$((warmup + steps)) --set train.threads=1
             --set train.batch_size="$2" --set optim.lr=0.01 --set optim.schedule=constant --json)
  "${cmd[@]}" >"$stdout_file" 2>"$stderr_file" || rc=$?
  check_done "$rc" "${cmd[*]}"
}

run_ddp() {  # model batch np
  local cmd=(timeout "$run_timeout" "$python" bench/ddp_train.py --model "$1"
             --batch-size "$2" --np "$3" --steps "$steps" --warmup "$warmup" --threads 1) rc=0
  "${cmd[@]}" >"$stdout_file" 2>"$stderr_file" || rc=$?
  check_done "$rc" "${cmd[*]}"
}

# Appends the done line in $stdout_file as a result line: impl model batch np rep.
record() {
  tail -n 1 "$stdout_file" | jq -c --arg run "$run_id" --arg commit "$commit" \
    --arg impl "$1" --arg model "$2" --argjson batch "$3" --argjson np "$4" --argjson rep "$5" \
    --argjson steps "$steps" --argjson warmup "$warmup" \
    '{run: $run, commit: $commit, impl: $impl, model: $model, np: $np, batch: $batch,
      rep: $rep, steps: $steps, warmup: $warmup, threads: 1, steps_per_sec: .steps_per_sec,
      wall_s: .wall_s}' | tee -a "$out" >&2
}

for case in "lenet5 64" "mlp 128"; do
  read -r model batch <<<"$case"
  for np in ${NPS:-2 1}; do
    for ((rep = 1; rep <= reps; rep++)); do
      echo "train_speed: $model batch $batch, $np ranks, rep $rep/$reps" >&2
      run_distml "$model" "$batch" "$np" mpi
      record distml "$model" "$batch" "$np" "$rep"
      if ((np > 1)); then  # at one rank the engines do not communicate
        run_distml "$model" "$batch" "$np" gloo
        record distml-gloo "$model" "$batch" "$np" "$rep"
      fi
      run_ddp "$model" "$batch" "$np"
      record ddp "$model" "$batch" "$np" "$rep"
    done
  done
done
"$python" bench/summarize_train.py --run "$run_id" "$out"
