#!/usr/bin/env bash
# The collective benchmark recorded in docs/benchmarks.md: all-reduce on every engine at 2, 3
# and 4 ranks, every algorithm, raw MPI_Allreduce beside it in the same job. Writes one JSON
# lines file per run to bench/results/ and prints a summary table.
set -euo pipefail
cd "$(dirname "$0")/.."
distml=${DISTML:-build/distml}
sizes=${SIZES:-4,1K,64K,1M,16M,64M}
reps=${REPS:-5}
out=bench/results
mkdir -p "$out"
for np in ${NPS:-2 3 4}; do
  for engine in ${ENGINES:-mpi gloo local}; do
    echo "bench: allreduce, $engine engine, $np ranks" >&2
    "$distml" bench allreduce --np "$np" --engine "$engine" --algo native,ring,hd,tree,auto \
      --sizes "$sizes" --reps "$reps" --json >"$out/allreduce_${engine}_np${np}.jsonl"
  done
done
/usr/bin/python3 bench/summarize.py "$out"/allreduce_*_np*.jsonl
