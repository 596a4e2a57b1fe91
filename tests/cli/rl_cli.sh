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
# apex at 2 ranks runs its actor beside the replay, which needs messages from a rank to itself:
# the gloo engine has none and refuses it, so apex takes 3 ranks there.
rl() {
  local ranks=$np
  [[ $1 == apex* && $engine == gloo && $np -lt 3 ]] && ranks=3
  "$distml" rl "$@" --engine "$engine" --np "$ranks"
}
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
assert done["cores"] >= 1 and done["env_steps_per_sec_per_core"] > 0, done
assert isinstance(done["eval_mean_return"], float), done
PY
  echo "ok: $1 on $2 done line"
}
# Over each engine, one algorithm of each way its ranks talk: ppo all-reduces gradients (as
# a2c does), a3c sends gradients to rank 0 for its parameters, impala queues unrolls to a
# learner, apex fills a replay with prioritised transitions (as apex_dpg does); the local
# engine runs all six. Over mpi, impala and apex (and apex_dpg) also run as docs/rl.md shows
# them (cli.DocsCommandsRunAsShown); over gloo, apex's replay is the queue impala's learner
# also has; so this runs only what those do not.
algorithms=(ppo:cartpole a3c:cartpole)
[[ $engine == gloo ]] && algorithms+=(apex:cartpole)
[[ $engine == local ]] && algorithms+=(impala:cartpole apex:cartpole)
[[ $scope == all ]] && algorithms+=(a2c:cartpole apex_dpg:pendulum)
for case in "${algorithms[@]}"; do
  algo=${case%:*} env=${case#*:}
  out=$(rl "$algo" --env "$env" "${quick[@]}" --json 2>"$dir/err") ||
    fail "$algo exited $?: $(cat "$dir/err")"
  check_done "$algo" "$env" "$out"
done
# Checkpoints: saved atomically at the end; --resume goes on counting from them: the resumed
# run's first update is the one after the checkpoint's (a fresh run would start at 1).
small=(--set algo.unroll=64 --set env.copies=2)  # several updates in 2000 steps
out=$(rl ppo --env pendulum "${quick[@]}" "${small[@]}" --set run.checkpoint_dir="$dir/ck" --json) ||
  fail "the run to resume from failed"
[[ -s $dir/ck/rl_checkpoint.bin ]] || fail "no checkpoint in $dir/ck"
out2=$(rl ppo --env pendulum "${quick[@]}" "${small[@]}" --set run.env_steps=4000 \
  --set run.log_every=1 --resume "$dir/ck" --json) || fail "resume failed"
/usr/bin/python3 - "$out" "$out2" <<'PY' || fail "resume did not continue from the checkpoint: $out2"
import json, sys
first = json.loads(sys.argv[1].splitlines()[-1])
events = [json.loads(l) for l in sys.argv[2].splitlines()]
updates = [e["update"] for e in events if e["event"] == "update"]
done = events[-1]
assert updates and updates[0] == first["updates"] + 1, (first["updates"], updates[:3])
assert done["updates"] == updates[-1] and done["env_steps"] >= 4000, done
PY
printf 'garbage' >"$dir/ck/rl_checkpoint.bin"
expect 2 "rl_checkpoint.bin" rl ppo --env cartpole "${quick[@]}" --resume "$dir/ck"

[[ $scope == all ]] || { echo "all rl cli checks of this engine passed"; exit 0; }
for env in acrobot mountaincar mountaincar_continuous pendulum humanoid; do
  out=$(rl ppo --env "$env" "${quick[@]}" --json 2>"$dir/err") || fail "ppo on $env: $(cat "$dir/err")"
  check_done ppo "$env" "$out"
done
out=$(rl impala --env pendulum "${quick[@]}" --json 2>"$dir/err") || fail "impala pendulum: $(cat "$dir/err")"
check_done impala pendulum "$out"

# An environment of the user's own, as a process speaking JSON lines (exec:COMMAND), its copies
# (processes) stepped on two worker threads, double-buffered (with one worker, as docs/rl.md
# shows it, in cli.DocsCommandsRunAsShown).
here=$(cd "$(dirname "$0")" && pwd)
corridor="exec:/usr/bin/python3 $here/../../examples/rl/exec/corridor.py"
out=$(rl ppo --env "$corridor" "${quick[@]}" --set run.env_workers=2 --json 2>"$dir/err") ||
  fail "exec corridor, 2 env workers: $(cat "$dir/err")"
check_done ppo "$corridor" "$out"
# One that dies at its third step: exit 2, naming the environment, the step and how it ended.
broken="exec:/usr/bin/python3 $here/../rl/broken_env.py exit 3"
out=$(rl ppo --env "$broken" "${quick[@]}" 2>&1)
rc=$?
[[ $rc -eq 2 ]] || fail "the broken environment: exit $rc: $out"
for says in "environment '$broken'" "step 3 of episode 1" "it exited with status 3"; do
  grep -qF -- "$says" <<<"$out" || fail "the broken environment's error lacks '$says': $out"
done
echo "ok: exit 2 naming the environment, the step and how it ended"
expect 2 "step 3 of episode 1" rl ppo --env "$broken" "${quick[@]}" --set run.env_workers=2

# Bad input: exit 2 and a message naming what is wrong.
expect 2 "unknown key 'algo.gama'; did you mean 'algo.gamma'?" rl ppo --set algo.gama=0.9
expect 2 "key 'algo.unroll' must be an integer >= 1, got 0" rl ppo --set algo.unroll=0
expect 2 "apex (DQN) needs discrete actions" rl apex --env pendulum
expect 2 "apex_dpg needs continuous actions" rl apex_dpg --env cartpole
expect 2 "a2c is one pass over one minibatch" rl a2c --set algo.epochs=4
expect 2 "run.env_workers = 9 is more than the 8 environment copies" rl ppo --set run.env_workers=9
# --print-config: every key, where each came from, and exit 0 without running.
expect 0 "examples/rl/ppo_cartpole.toml" rl ppo --env cartpole --print-config
expect 0 "algo.epochs = 1 " rl a2c --env acrobot --print-config
expect 2 "walker" rl ppo --env walker
printf '[algo]\nunroll = = 3\n' >"$dir/bad.toml"
expect 2 "bad.toml:2" rl ppo --config "$dir/bad.toml"
expect 2 "needs at least 2 ranks" "$distml" rl impala --engine "$engine" --np 1
echo "all rl cli checks passed"
