#!/usr/bin/env bash
# examples/custom_loop as a project of one's own builds it: against distml installed by
# `cmake --install` into a fresh prefix, found with find_package(distml). Then it trains at 2
# ranks under mpi and gloo, with a strategy that all-reduces gradients and one that averages
# models, and must classify its test points (the circle problem: a 2-32-2 MLP reaches ~0.96;
# guessing gives 0.5, a wrong update or a broken averaging stays far below 0.9).
# Usage: custom_loop.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cmake --install "$build" --prefix "$dir/prefix" >/dev/null
# No build type (no optimisation): a quarter faster to compile, and the training's time is
# libtorch's and distml's, which are built already.
cmake -S "$source/examples/custom_loop" -B "$dir/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$dir/prefix" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir/build" >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
for engine in mpi gloo; do
  for strategy in allreduce local_sgd; do
    out=$("$build/distml" launch -n 2 --engine "$engine" -- "$dir/build/custom_loop" "$strategy")
    echo "$out"
    accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' <<<"$out")
    [[ $out == *"on 2 ranks over $engine"* ]] || { echo "FAIL: not 2 ranks over $engine" >&2; exit 1; }
    awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' || { echo "FAIL: accuracy $accuracy" >&2; exit 1; }
  done
done
