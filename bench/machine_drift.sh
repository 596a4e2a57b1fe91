#!/usr/bin/env bash
# Whether a 2-rank run's slowdown is the machine's (docs/benchmarks.md, "Weak scaling at 2
# ranks"): alternates, TURNS times, a 1-rank and a 2-rank LeNet-5 run (gloo, 1,000 steps) with a
# fixed single-threaded loop on core 0 alone and then on both cores at once. Prints each turn's
# step times, their ratio, and the loop's seconds alone and on each core side by side.
# Usage: bench/machine_drift.sh [TURNS]
set -euo pipefail
cd "$(dirname "$0")/.."
turns=${1:-12}
step_ms() {  # NP
  build/distml train --config examples/mnist_lenet.toml --set train.max_steps=1000 \
    --engine gloo --np "$1" --json 2>/dev/null | tail -1 |
    /usr/bin/python3 -c 'import json, sys; print("%.3f" % (1000 / json.load(sys.stdin)["steps_per_sec"]))'
}
loop_s() {  # CORE: seconds of a fixed amount of float arithmetic on that core
  taskset -c "$1" /usr/bin/python3 -c '
import time
t = time.perf_counter(); x = 0.0
for i in range(15_000_000): x = x * 0.999999 + 1.0
print("%.4f" % (time.perf_counter() - t))'
}
echo "time np1_ms np2_ms np1/np2 loop_alone_s loop_core0_s loop_core1_s"
side=$(mktemp)
for ((turn = 0; turn < turns; ++turn)); do
  one=$(step_ms 1) two=$(step_ms 2) alone=$(loop_s 0)
  loop_s 0 >"$side" &
  core1=$(loop_s 1)
  wait
  echo "$(date +%T) $one $two $(/usr/bin/python3 -c "print('%.3f' % ($one / $two))") $alone" \
    "$(cat "$side") $core1"
done
rm -f "$side"
