#!/usr/bin/env bash
# The strategy comparison of docs/benchmarks.md: MNIST mlp at 4 ranks (oversubscribed on a
# 2-core machine), the same model, data order, optimizer and epoch budget for every strategy;
# evaluated every EVAL_EVERY steps so that the wall time to the target accuracy can be read
# off (training time only: evaluation is left out). Also straggler runs (rank 1 computing 2x
# slower) and the optimizer-state bytes of ZeRO against plain Adam. ps and asynchronous easgd
# give one of the 4 ranks to the server, so 3 workers train (global batch 96, not 128).
# Every run's event lines go to bench/results/strategies/<case>.jsonl; then a table.
# Knobs: CASES (names below, default all), EPOCHS (10), EVAL_EVERY (156), BUILD (build),
# RUN_TIMEOUT (1800 s), OUT_DIR (bench/results/strategies).
set -euo pipefail
cd "$(dirname "$0")/.."
distml=${BUILD:-build}/distml
epochs=${EPOCHS:-10}
eval_every=${EVAL_EVERY:-156}  # a third of an epoch at 4 ranks x 32
run_timeout=${RUN_TIMEOUT:-1800}
dir=${OUT_DIR:-bench/results/strategies}
mkdir -p "$dir"

# The 2-rank mlp config's global batch (128) and recipe, at 4 ranks.
base="--config examples/mnist_mlp.toml --set train.batch_size=32 --set train.epochs=$epochs"
base+=" --set train.eval_every=$eval_every --set train.log_every=1000000"
adam="--set optim.name=adam --set optim.lr=0.001 --set optim.momentum=0 --set train.max_steps=100"
slow="--set train.slow_rank=1 --set train.slow_factor=2"

# name | overrides
cases=(
  "allreduce|--set strategy.name=allreduce"
  "ps_bsp|--set strategy.name=ps --set strategy.mode=bsp"
  "ps_asp|--set strategy.name=ps --set strategy.mode=asp"
  "ps_ssp3|--set strategy.name=ps --set strategy.mode=ssp --set strategy.staleness=3"
  "local_sgd_h8|--set strategy.name=local_sgd --set strategy.period=8"
  "post_local_sgd|--set strategy.name=post_local_sgd --set strategy.period=8 --set strategy.warmup_steps=468"
  "easgd_sync|--set strategy.name=easgd --set strategy.period=8 --set strategy.alpha=0.2"
  "easgd_async|--set strategy.name=easgd --set strategy.asynchronous=true --set strategy.period=8 --set strategy.alpha=0.2"
  "gossip_ring|--set strategy.name=gossip --set strategy.topology=ring"
  "gossip_exponential|--set strategy.name=gossip --set strategy.topology=exponential"
  "zero1|--set strategy.name=zero --set strategy.stage=1"
  "zero2|--set strategy.name=zero --set strategy.stage=2"
  "slow_allreduce|--set strategy.name=allreduce $slow"
  "slow_local_sgd_h8|--set strategy.name=local_sgd --set strategy.period=8 $slow"
  "slow_ps_bsp|--set strategy.name=ps --set strategy.mode=bsp $slow"
  "slow_ps_asp|--set strategy.name=ps --set strategy.mode=asp $slow"
  "slow_ps_ssp3|--set strategy.name=ps --set strategy.mode=ssp --set strategy.staleness=3 $slow"
  "adam_state_allreduce|--set strategy.name=allreduce $adam"
  "adam_state_zero1|--set strategy.name=zero --set strategy.stage=1 $adam"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name args <<<"$c"
  [[ -z ${CASES:-} || " $CASES " == *" $name "* ]] || continue
  cmd="$distml train --np 4 --engine mpi --json $base $args"
  echo "bench: $name: $cmd" >&2
  # shellcheck disable=SC2086  # a word list on purpose
  if ! timeout "$run_timeout" $cmd >"$dir/$name.jsonl.tmp"; then
    echo "bench: $name failed; last lines:" >&2
    tail -n 5 "$dir/$name.jsonl.tmp" >&2
    exit 1
  fi
  printf '{"event": "command", "command": "%s"}\n' "${cmd#"$distml" }" >>"$dir/$name.jsonl.tmp"
  mv "$dir/$name.jsonl.tmp" "$dir/$name.jsonl"
done
/usr/bin/python3 bench/summarize_strategies.py "$dir"
