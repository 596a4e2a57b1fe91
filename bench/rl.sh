#!/usr/bin/env bash
# The deep RL targets of docs/benchmarks.md: each (algorithm, environment) pair with its tuned
# defaults (examples/rl/) at --np 2 over several seeds; the IMPALA decoupling run (each actor
# first runs alone, then with the learner training, in the same run); the Ape-X replay's
# throughput inside a run and as a micro-benchmark; one PPO actor's env steps/s with 1 and 2
# environment workers (run.env_workers), taking turns in one process.
# Every run's event lines go to bench/results/rl/<case>.jsonl; then a table.
# Knobs: CASES (names below, default all), SEEDS ("1 2 3"), BUILD (build), RUN_TIMEOUT (900 s),
# OUT_DIR (bench/results/rl).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
distml=$build/distml
seeds=${SEEDS:-1 2 3}
run_timeout=${RUN_TIMEOUT:-900}
dir=${OUT_DIR:-bench/results/rl}
mkdir -p "$dir"

# name | arguments after `distml rl` (seeded cases get --set run.seed=S and a _sS suffix)
seeded=(
  "ppo_cartpole|ppo --env cartpole"
  "a2c_cartpole|a2c --env cartpole"
  "impala_cartpole|impala --env cartpole"
  "apex_cartpole|apex --env cartpole"
  "a3c_cartpole|a3c --env cartpole --np 3"
  "ppo_acrobot|ppo --env acrobot"
  "ppo_pendulum|ppo --env pendulum"
  "ppo_mountaincar_continuous|ppo --env mountaincar_continuous"
  "ppo_humanoid|ppo --env humanoid"
  # A3C and IMPALA with their built-in defaults (no tuned file) on every discrete task
  "a3c_defaults_cartpole|a3c --env cartpole --np 3 --config /dev/null --set run.env_steps=300000"
  "impala_defaults_cartpole|impala --env cartpole --np 3 --config /dev/null --set run.env_steps=300000"
  "a3c_defaults_acrobot|a3c --env acrobot --np 3 --set run.env_steps=300000"
  "impala_defaults_acrobot|impala --env acrobot --np 3 --set run.env_steps=300000"
  "a3c_defaults_mountaincar|a3c --env mountaincar --np 3 --set run.env_steps=4000000"
  "impala_defaults_mountaincar|impala --env mountaincar --np 3 --set run.env_steps=4000000"
)
single=(
  "impala_decoupling|impala --env cartpole --set impala.solo_unrolls=400 --set run.target_return=1000000 --set run.eval_every=1000000"
  "apex_replay|apex --env cartpole --set apex.env_steps_per_update=0 --set run.env_steps=300000 --set run.eval_episodes=10"
)

run_case() {  # run_case NAME ARGS...
  local name=$1
  shift
  [[ -z ${CASES:-} || " $CASES " == *" ${name%_s[0-9]*} "* ]] || return 0
  local np="--np 2"  # unless the case names its own
  [[ " $* " == *" --np "* ]] && np=""
  local cmd="$distml rl $* $np --json"
  echo "bench: $name: $cmd" >&2
  # shellcheck disable=SC2086  # a word list on purpose
  if ! timeout "$run_timeout" $cmd >"$dir/$name.jsonl.tmp"; then
    echo "bench: $name failed; last lines:" >&2
    tail -n 5 "$dir/$name.jsonl.tmp" >&2
    exit 1
  fi
  printf '{"event": "command", "command": "%s"}\n' "${cmd#"$distml" }" >>"$dir/$name.jsonl.tmp"
  mv "$dir/$name.jsonl.tmp" "$dir/$name.jsonl"
}

for c in "${seeded[@]}"; do
  IFS='|' read -r name args <<<"$c"
  for s in $seeds; do
    # shellcheck disable=SC2086
    run_case "${name}_s$s" $args --set run.seed="$s"
  done
done
for c in "${single[@]}"; do
  IFS='|' read -r name args <<<"$c"
  # shellcheck disable=SC2086
  run_case "$name" $args
done
ninja -C "$build" distml_replay_throughput distml_actor_throughput >/dev/null  # not in the default build
if [[ -z ${CASES:-} || " $CASES " == *" replay_micro "* ]]; then
  "$build/bench/distml_replay_throughput" >"$dir/replay_micro.jsonl"
fi
if [[ -z ${CASES:-} || " $CASES " == *" actor_throughput "* ]]; then
  { "$build/bench/distml_actor_throughput" cartpole 8 128 15 1 2
    "$build/bench/distml_actor_throughput" humanoid 8 64 9 1 2; } >"$dir/actor_throughput.jsonl"
fi
/usr/bin/python3 bench/summarize_rl.py "$dir"
