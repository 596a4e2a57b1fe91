#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a `distml` command that works from any folder
# (--version, rl's tuned configs and the report's plotting library from PREFIX/share/distml),
# and examples/custom_loop as a project of one's own builds against it, found with
# find_package(distml). Then it trains at 2
# ranks, all-reducing gradients over mpi and averaging models over gloo, and must classify its test points (the circle problem: a 2-32-2 MLP reaches ~0.96;
# guessing gives 0.5, a wrong update or a broken averaging stays far below 0.9).
# Usage: custom_loop.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cmake --install "$build" --prefix "$dir/prefix" >/dev/null
# The installed command works from any folder, with what it reads at run time beside it.
installed=$dir/prefix/bin/distml
version=$(cd "$dir" && "$installed" --version)
[[ $version == "$(sed -n 's/^project(distml VERSION \([0-9.]*\).*/\1/p' "$source/CMakeLists.txt")" ]] ||
  { echo "FAIL: $installed --version says '$version'" >&2; exit 1; }
config=$(cd "$dir" && "$installed" rl ppo --env cartpole --print-config)
[[ $config == *"the tuned file $dir/prefix/share/distml/examples/rl/ppo_cartpole.toml"* ]] ||
  { echo "FAIL: the installed rl does not read its tuned configs from the prefix" >&2; exit 1; }
printf 'x,y\n0,0\n1,1\n0.1,0\n0.9,1\n0.2,0\n0.8,1\n' >"$dir/tiny.csv"
(cd "$dir" && "$installed" fit logreg --data tiny.csv --run-dir run >/dev/null &&
  env -u DISTML_VEGA_DIR "$installed" report run --out page.html >/dev/null) ||
  { echo "FAIL: the installed fit and report" >&2; exit 1; }
grep -q "vega" "$dir/page.html" || { echo "FAIL: no plotting library in the page" >&2; exit 1; }
# No build type (no optimisation): a quarter faster to compile, and the training's time is
# libtorch's and distml's, which are built already.
cmake -S "$source/examples/custom_loop" -B "$dir/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$dir/prefix" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir/build" >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
# Each engine once, and each strategy once: a gradient all-reduce over mpi, model averaging over
# gloo.
for run in "mpi allreduce" "gloo local_sgd"; do
  read -r engine strategy <<<"$run"
  out=$("$build/distml" launch -n 2 --engine "$engine" -- "$dir/build/custom_loop" "$strategy")
  echo "$out"
  accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' <<<"$out")
  [[ $out == *"on 2 ranks over $engine"* ]] || { echo "FAIL: not 2 ranks over $engine" >&2; exit 1; }
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' || { echo "FAIL: accuracy $accuracy" >&2; exit 1; }
done
