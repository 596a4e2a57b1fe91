#!/usr/bin/env bash
# ZeRO stage 3 under a per-rank memory allowance (docs/benchmarks.md, "ZeRO stage 3"): each rank
# of a 4-rank run over Open MPI is moved, as it starts, into a memory cgroup of its own limited to
# ALLOWANCE_MB (cgroup v1), so that the kernel's OOM killer ends a rank
# that needs more, as on a machine of that size. allreduce and zero 3 train the same model: Adam
# on an MLP of LAYERS hidden layers of 2048 (16.8 MB each in float32), 3 steps of 64 rows on
# MNIST. Prints, per strategy, the exit status, each rank's peak charge in its cgroup (the
# kernel's count, page cache included) and the done line's test accuracy.
# Usage (root): bench/zero_memory_limit.sh ALLOWANCE_MB LAYERS
set -euo pipefail
cd "$(dirname "$0")/.."
allowance_mb=${1:?ALLOWANCE_MB}
layers=${2:?LAYERS}
root=/sys/fs/cgroup/memory
[[ -w $root ]] || { echo "needs root and cgroup v1's memory controller at $root" >&2; exit 2; }
hidden=$(printf '2048,%.0s' $(seq 1 "$layers"))

cleanup() {
  for g in "$root"/distml-rank-*; do
    [[ -d $g ]] || continue
    while read -r pid; do echo "$pid" > "$root/cgroup.procs" 2>/dev/null || true; done < "$g/cgroup.procs"
    rmdir "$g" 2>/dev/null || true
  done
}
trap cleanup EXIT

# Moves every rank process (a child of mpirun) into a cgroup of its own as soon as it appears.
confine_ranks() {  # MPIRUN_PARENT_PID
  local parent=$1 n=0 seen=" "
  while kill -0 "$parent" 2>/dev/null; do
    for launcher in $(pgrep -P "$parent" -x mpirun || true); do
      for pid in $(pgrep -P "$launcher" || true); do
        [[ $seen == *" $pid "* ]] && continue
        local g="$root/distml-rank-$n"
        mkdir -p "$g"
        # Charges made before the move stay behind where the kernel cannot move them (a rank
        # is moved within ~10 ms of its start, long before it builds the model).
        echo 3 > "$g/memory.move_charge_at_immigrate" 2>/dev/null || true
        echo $((allowance_mb << 20)) > "$g/memory.limit_in_bytes"
        echo "$pid" > "$g/cgroup.procs" 2>/dev/null || true
        seen+="$pid "
        n=$((n + 1))
      done
    done
    sleep 0.01
  done
}

for strategy in allreduce zero; do
  cleanup
  log=$(mktemp)
  build/distml train --config examples/mnist_mlp.toml --np 4 --engine mpi \
    --set strategy.name=$strategy --set strategy.stage=3 --set optim.name=adam \
    --set optim.lr=0.0001 --set optim.schedule=constant --set "model.layers=[784,${hidden}10]" \
    --set train.max_steps=3 --set train.batch_size=64 --json > "$log" 2>&1 &
  job=$!
  confine_ranks "$job" &
  watcher=$!
  status=0
  wait "$job" || status=$?
  wait "$watcher" || true
  peaks=""
  for g in "$root"/distml-rank-*; do
    [[ -d $g ]] && peaks+=" $(($(cat "$g/memory.max_usage_in_bytes") >> 20))"
  done
  accuracy=$(grep -o '"test_accuracy":[0-9.]*' "$log" | tail -1 | cut -d: -f2 || true)
  echo "$strategy layers $layers allowance ${allowance_mb} MB exit $status" \
    "rank peaks (MB):${peaks:- none} test_accuracy ${accuracy:-none}"
  [[ $status -eq 0 ]] || grep -m3 -iE "error|killed|signal" "$log" | cut -c1-200 || true
  rm -f "$log"
done
