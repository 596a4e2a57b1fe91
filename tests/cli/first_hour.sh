#!/usr/bin/env bash
# A newcomer's first hour: each mistake of the kind a new user makes gets one clear error, the
# exact words checked here, with exit code 2, no stack trace and no mpirun text on the terminal.
# Usage: first_hour.sh DISTML
set -uo pipefail
distml=$1
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
dir=$(mktemp -d)
# A data folder of the test's own under the source tree's data/ (ignored by git), for the run
# from another folder below.
own_data=$(cd "$here/../.." && pwd)/data/first-hour-$$
trap 'rm -rf "$dir" "$own_data"' EXIT
source "$here/cli_lib.sh"
cd "$dir" || exit 1
"$python" "$here/make_idx.py" idx >/dev/null
cat >lenet.toml <<TOML
[data]
dataset = "mnist"
path = "idx"
[train]
batch_size = 16
max_steps = 8
eval_every = 4
TOML
"$python" - <<'PY'
import numpy as np, torch
rng = np.random.default_rng(0)
x = rng.normal(size=(60, 4)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)
np.savez("d.npz", x=x, y=y)
y[7] = 6  # a class the 4-output model below does not have
np.savez("bad_label.npz", x=x, y=y)
with open("named.csv", "w") as f:
    f.write("a,b,label\n")
    for i in range(30):
        f.write(f"{x[i, 0]},{x[i, 1]},{'yes' if y[i] % 2 else 'no'}\n")
model = torch.nn.Linear(4, 4)
torch.jit.script(model).save("scripted.pt")
torch.save(model, "pickled.pt")
PY

for engine in mpi gloo; do
  one_error "/nonexistent/mnist/train-images-idx3-ubyte[.gz] not found" \
    "$distml" train --config lenet.toml --np 2 --engine "$engine" --set data.path=/nonexistent/mnist
done
one_error "strategy.alpha = 0.9 with 2 ranks: EASGD needs alpha x world size <= 1" "$distml" train --config lenet.toml --np 2 \
  --set strategy.name=easgd --set strategy.alpha=0.9
printf 'a,b,label\n1,2,x\n3\n' >short.csv
one_error "short.csv:3" "$distml" fit logreg --data short.csv --np 2
# An exec: environment whose answers do not match its declared observation space.
cat >wrong_size_env.py <<PY
import sys
sys.path.insert(0, "$here/../../examples/rl/exec")
import distml_env
class DeclaresTwoSendsOne:
    observation_space = distml_env.Box([0.0, 0.0], [1.0, 1.0])
    action_space = distml_env.Discrete(2)
    def reset(self, seed=None): return [0.5], {}
    def step(self, action): return [0.5], 0.0, False, False, {}
distml_env.serve(DeclaresTwoSendsOne())
PY
one_error 'its answer needs "observation": 2 numbers; got {"observation":[0.5]}' \
  "$distml" rl ppo --env "exec:$python wrong_size_env.py" --np 2 --set run.env_steps=2000

# MASTER_PORT held by another process (another job's rendezvous): rank 0 says so, before c10d's
# log lines.
coproc holder { exec "$python" -c 'import socket, time
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(); print(s.getsockname()[1], flush=True)
time.sleep(120)'; }
read -r port <&"${holder[0]}"
one_error "MASTER_PORT=$port is in use on this host" env MASTER_PORT="$port" \
  "$distml" train --config lenet.toml --np 2 --engine gloo
kill "$holder_PID"

# From another folder, a relative data.path that is not there is found where `make data` puts
# the data sets (the source tree's data/), as `distml rl` finds its tuned configs.
mkdir -p "$own_data" && cp idx/* "$own_data/"
expect 0 "after 2 steps" "$distml" train --config lenet.toml --set data.path="data/$(basename "$own_data")" \
  --set train.max_steps=2

# Every path the run writes is checked before it trains.
expect 2 "train.export: cannot write in /proc/nope" \
  "$distml" train --config lenet.toml --set train.export=/proc/nope/w.pt
touch a_file
expect 2 "train.checkpoint_dir: cannot write in a_file/ckpt (Not a directory)" \
  "$distml" train --config lenet.toml --set train.checkpoint_dir=a_file/ckpt \
  --set train.checkpoint_every=4
expect 2 "--model-out: cannot write in a_file" "$distml" fit logreg --data named.csv \
  --model-out a_file/m.json

# Each evaluation shows its task's metrics only.
out=$("$distml" train --config lenet.toml --run-dir lenet_run 2>&1) || fail "train: $out"
grep -q "test accuracy" <<<"$out" && ! grep -q "R^2" <<<"$out" ||
  fail "a classification run's lines: $out"
events=$(cat lenet_run/metrics.jsonl)  # the events as --json prints them
grep '"event":"eval"' <<<"$events" | grep -q '"test_accuracy"' &&
  ! grep -q '"test_r2"\|"test_mse"' <<<"$events" || fail "a classification run's events: $events"
echo "ok: classification shows accuracy, no R^2 or MSE"

# A model saved with torch.save, and class ids beyond the model's outputs.
npz_run() {  # npz_run DATA MODEL
  printf '[data]\ndataset = "npz"\npath = "%s"\n[model]\nname = "torchscript"\npath = "%s"\n[train]\nbatch_size = 8\nmax_steps = 2\n' "$1" "$2" >npz.toml
  "$distml" train --config npz.toml
}
expect 2 'pickled.pt: written by torch.save (a pickled module or a state_dict), not TorchScript; distml runs a scripted module: in Python, torch.jit.script(model).save("pickled.pt")' \
  npz_run d.npz pickled.pt
expect 2 "bad_label.npz: training sample 7 has label 6, but the model gives 4 classes (ids 0..3); the TorchScript model scripted.pt must give one output per class" \
  npz_run bad_label.npz scripted.pt

# A misspelt command, predictions without --out, and fit's formats.
expect 2 "unknown command 'trian'; did you mean 'train'?" "$distml" trian --config lenet.toml
"$distml" fit logreg --data named.csv --model-out m.json >/dev/null || fail "fit"
out=$("$distml" predict --model m.json --data named.csv 2>/dev/null) || fail "predict"
[[ $(head -n 1 <<<"$out") == prediction && $(wc -l <<<"$out") -eq 31 ]] ||
  fail "predict without --out: not the CSV on standard output: $out"
echo "ok: predict without --out writes its CSV to standard output"
expect 2 "d.npz: a zip archive (NumPy's .npz?); fit and predict read CSV" \
  "$distml" fit logreg --data d.npz
expect 2 "--label none: logistic_regression learns from labels" \
  "$distml" fit logreg --data named.csv --label none

# Paper cuts.
expect 0 "Usage: distml train [OPTIONS]" "$distml" train --help
"$distml" fit --help | grep -q "resum" && fail "fit --help speaks of resuming"
"$distml" fit kmeans --data named.csv --label label --set k=2 --run-dir run >/dev/null || fail "fit"
expect 0 '"event":"done"' "$distml" report run --out report.html --json
expect 0 "on 1 rank)" "$distml" fit logreg --data named.csv
"$distml" train --config lenet.toml --set train.checkpoint_dir=ck --set train.checkpoint_every=4 \
  >/dev/null || fail "train with checkpoints"
expect 0 "resuming from ck/checkpoint-000000000008.dml at step 8" "$distml" train \
  --config lenet.toml --set train.max_steps=12 --resume ck
echo "ok: all"
