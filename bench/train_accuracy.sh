#!/usr/bin/env bash
# The accuracy targets recorded in docs/benchmarks.md: each example config trained to the end
# on the mpi engine, its done line appended to bench/results/train_accuracy.jsonl, then a table
# of test accuracy (perplexity for the language model) against the target.
# Knobs: CASES (names below, default all; a subset is appended to the results), BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."
distml=${BUILD:-build}/distml
out=bench/results/train_accuracy.jsonl
mkdir -p bench/results
[[ -n ${CASES:-} ]] || : >"$out"

# name | ranks | target | config and overrides
cases=(
  "lenet5_np2|2|0.990|examples/mnist_lenet.toml --set train.epochs=10 --set optim.schedule=cosine"
  # The same global batch (128) as at 2 ranks: synchronous SGD follows the same trajectory.
  "lenet5_np4|4|0.990|examples/mnist_lenet.toml --set train.epochs=10 --set optim.schedule=cosine --set train.batch_size=32"
  "mlp_np2|2|0.980|examples/mnist_mlp.toml"
  "resnet20_fashion_np2|2|0.920|examples/fashion_resnet20.toml"
  "char_lstm_np2|2|perplexity|examples/text_char_lstm.toml"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name np target args <<<"$c"
  [[ -z ${CASES:-} || " $CASES " == *" $name "* ]] || continue
  echo "bench: $name ($np ranks): distml train --config $args" >&2
  # shellcheck disable=SC2086  # args is a word list on purpose
  line=$("$distml" train --np "$np" --engine mpi --json --config $args --set train.log_every=1000000 | tail -n 1)
  /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.update(case=sys.argv[2], target=sys.argv[3], command=sys.argv[4]); print(json.dumps(d))' \
    "$line" "$name" "$target" "distml train --np $np --engine mpi --config $args" >>"$out"
done
/usr/bin/python3 bench/summarize_accuracy.py "$out"
