#!/usr/bin/env bash
# `distml rl` as users run it: every algorithm to its done line, every environment, the tuned
# example configs, checkpoints and resume, and bad input with exit code 2.
# Usage: rl_cli.sh DISTML ENGINE NP [SCOPE]
#   SCOPE all (the default): everything; engine: what depends on the engine (every algorithm on
#   cartpole, checkpoint and resume), leaving the environments and the bad input, which do not,
#   to one engine.
set -uo pipefail
distml=$1 engine=$2 np=$3 scope=${4:-all}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=cli_lib.sh
source "$(dirname "$0")/cli_lib.sh"
rl() { "$distml" rl "$@" --engine "$engine" --np "$np"; }
quick=(--set run.env_steps=2000 --set run.eval_episodes=2 --set run.log_every=0)

# The done line of each algorithm carries the fields the issue names, with sane values.
check_done() {  # check_done ALGO ENV OUTPUT
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY' || fail "done line of $1 on $2: $3"
import json, sys
algo, env, out = sys.argv[1], sys.argv[2], sys.argv[3].strip().splitlines()
done = json.loads(out[-1])
assert done["event"] == "done" and done["algo"] == algo and done["env"] == env, done
assert done["eval_episodes"] == 2 and done["env_steps"] >= 2000, done
assert done["env_steps_per_sec"] > 0 and done["wall_s"] > 0, done
assert isinstance(done["eval_mean_return"], float), done
PY
  echo "ok: $1 on $2 done line"
}
for algo in ppo a2c a3c impala apex; do
  out=$(rl "$algo" --env cartpole "${quick[@]}" --json 2>"$dir/err") ||
    fail "$algo exited $?: $(cat "$dir/err")"
  check_done "$algo" cartpole "$out"
done
# Checkpoints: saved atomically at the end; --resume goes on counting from them.
expect 0 '"updates":' rl ppo --env cartpole "${quick[@]}" --set run.checkpoint_dir="$dir/ck" --json
[[ -s $dir/ck/rl_checkpoint.bin ]] || fail "no checkpoint in $dir/ck"
out=$(rl ppo --env cartpole "${quick[@]}" --set run.env_steps=4000 --resume "$dir/ck" --json) ||
  fail "resume failed"
/usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1].splitlines()[-1]); assert d['env_steps'] >= 4000 and d['updates'] > 1, d" "$out" ||
  fail "resume did not continue: $out"
printf 'garbage' >"$dir/ck/rl_checkpoint.bin"
expect 2 "rl_checkpoint.bin" rl ppo --env cartpole "${quick[@]}" --resume "$dir/ck"

[[ $scope == all ]] || { echo "all rl cli checks of this engine passed"; exit 0; }
for env in acrobot mountaincar mountaincar_continuous pendulum humanoid; do
  out=$(rl ppo --env "$env" "${quick[@]}" --json 2>"$dir/err") || fail "ppo on $env: $(cat "$dir/err")"
  check_done ppo "$env" "$out"
done
out=$(rl impala --env pendulum "${quick[@]}" --json 2>"$dir/err") || fail "impala pendulum: $(cat "$dir/err")"
check_done impala pendulum "$out"

# Bad input: exit 2 and a message naming what is wrong.
expect 2 "unknown key 'algo.gama'; did you mean 'algo.gamma'?" rl ppo --set algo.gama=0.9
expect 2 "key 'algo.unroll' must be an integer >= 1, got 0" rl ppo --set algo.unroll=0
expect 2 "apex (DQN) needs discrete actions" rl apex --env pendulum
expect 2 "walker" rl ppo --env walker
printf '[algo]\nunroll = = 3\n' >"$dir/bad.toml"
expect 2 "bad.toml:2" rl ppo --config "$dir/bad.toml"
expect 2 "needs at least 2 ranks" "$distml" rl impala --engine "$engine" --np 1
echo "all rl cli checks passed"
