#!/usr/bin/env bash
# `distml train` as users run it, on a small generated data set.
# Usage: train_cli.sh DISTML SCENARIO [ARGS...]
#   done ENGINE NP          the --json done line has the documented keys; export loads in torch
#   resume ENGINE NP [ARGS...]  4 steps, then --resume for 4 more == 8 steps straight
#   bad-input               each bad input is a clear error with exit code 2
#   strategies ENGINE NP [STRATEGY...]  each strategy (default: all) trains to a done line
#                           with agreeing replicas
#   pipeline ENGINE [SPLIT...]  2 replicas of a split model equal 2 plain replicas, for each
#                           split (default: all): gpipe, 1f1b, recompute, profile (the
#                           stages cut by measured time) (2 stages), tensor (2 tensor
#                           ranks), grid (2 stages x 2 tensor ranks); ddg (2 stages) equals
#                           itself on local ranks; over mpi, a
#                           grid that does not fit the ranks and models that cannot be split
#                           are refused, and a model over parallel.max_stage_params trains
#                           only when cut
#   pipeline-stall ENGINE   a stopped stage ends the other with an error naming both, in time
#   plan                    distml plan over 2 local ranks: every candidate cuts the model
#                           whole, the chosen one is the fastest predicted, --measure trains
#                           it; bad options exit with 2
set -uo pipefail
distml=$1 scenario=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$python" "$here/make_idx.py" "$dir/data"

cat >"$dir/lenet.toml" <<TOML
[data]
dataset = "mnist"
path = "$dir/data"
[model]
name = "lenet5"
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
[train]
batch_size = 16
max_steps = 8
log_every = 4
TOML

fail() { echo "FAIL: $*" >&2; exit 1; }
field() { "$python" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# expect CODE PATTERN CMD...: the command exits with CODE and its output contains PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [[ $rc -eq $code ]] || fail "expected exit $code, got $rc from: $*"$'\n'"$out"
  grep -qF -- "$pattern" <<<"$out" || fail "output of '$*' lacks: $pattern"$'\n'"$out"
  echo "ok: exit $rc, '$pattern'"
}

case $scenario in
  done)
    engine=$1 np=$2
    out=$("$distml" train --config "$dir/lenet.toml" --engine "$engine" --np "$np" --json \
      --set train.export="\"$dir/weights.pt\"") || fail "train exited with $?"
    done_line=$(tail -n 1 <<<"$out")
    "$python" - "$done_line" <<'PY' || exit 1
import json, sys
d = json.loads(sys.argv[1])
keys = ["test_accuracy", "test_loss", "steps", "steps_per_sec", "samples_per_sec",
        "comm_time_s", "overlap_fraction", "wall_s", "peak_rss_mb"]
missing = [k for k in keys if k not in d]
assert d.get("event") == "done" and not missing, f"done line lacks {missing}: {d}"
assert d["steps"] == 8 and d["steps_per_sec"] > 0 and 0 <= d["test_accuracy"] <= 1, d
# In MB: a rank holds LibTorch's touched code and data (hundreds of MB, never under 50) and
# fits the machine (bytes or kB would exceed any machine's memory in MB).
assert 50 < d["peak_rss_mb"] < 1 << 20, d["peak_rss_mb"]
print("ok: done line", d)
PY
    grep -q '"event":"step"' <<<"$out" || fail "no step metrics in: $out"
    "$python" - "$dir/weights.pt" <<'PY' || exit 1
import sys, torch
w = torch.load(sys.argv[1])
want = {"conv1.weight": (6, 1, 5, 5), "conv2.weight": (16, 6, 5, 5), "fc3.bias": (10,)}
for name, shape in want.items():
    assert tuple(w[name].shape) == shape, (name, w[name].shape)
print("ok: torch.load reads", len(w), "tensors")
PY
    ;;
  resume)
    engine=$1 np=$2
    shift 2
    extra=("$@")  # e.g. a split model: each stage's tensors and optimizer state go in the file
    run() {
      "$distml" train --config "$dir/lenet.toml" --engine "$engine" --np "$np" --json \
        "${extra[@]}" "$@" | tail -n 1
    }
    straight=$(run) || fail "straight run failed"
    run --set train.max_steps=4 --set train.checkpoint_dir="\"$dir/ckpt\"" >/dev/null ||
      fail "first half failed"
    resumed=$(run --resume "$dir/ckpt") || fail "resumed run failed"
    [[ $(field "$resumed" steps) == 4 && $(field "$resumed" global_step) == 8 ]] ||
      fail "resumed run did not take steps 5-8: $resumed"
    [[ $(field "$resumed" param_checksum) == $(field "$straight" param_checksum) ]] ||
      fail "4 + 4 steps differ from 8 straight: $resumed vs $straight"
    echo "ok: 4 + 4 steps == 8 straight ($(field "$straight" param_checksum))"
    # Damaged checkpoints, with none whole to fall back on, are refused, naming each file (the
    # fall-back to an older one is tests/ops/restart_cli.py's).
    for kept in "$dir"/ckpt/checkpoint-*.dml; do
      printf 'x' | dd of="$kept" bs=1 seek=100 conv=notrunc 2>/dev/null
    done
    expect 2 "checksum mismatch" "$distml" train --config "$dir/lenet.toml" --engine "$engine" \
      --np "$np" --resume "$dir/ckpt"
    ;;
  bad-input)
    train() { "$distml" train --config "$dir/lenet.toml" --engine local "$@"; }
    expect 2 "run \`make data\`" train --set data.path="\"$dir/nowhere\""
    expect 2 "did you mean 'train.batch_size'" train --set train.batchsize=3
    "$python" "$here/make_idx.py" "$dir/magic" --bad-magic
    expect 2 "train-images-idx3-ubyte: bad IDX magic number at offset 0" train --set data.path="\"$dir/magic\""
    "$python" "$here/make_idx.py" "$dir/short" --truncate
    expect 2 "train-images-idx3-ubyte: truncated at offset" train --set data.path="\"$dir/short\""
    "$python" "$here/make_idx.py" "$dir/label" --label 12
    expect 2 "label 12 of sample 0" train --set data.path="\"$dir/label\""
    # Ranks started with different configs: every rank stops at start, exit code 2.
    expect 2 "run a different configuration than rank 0" "$distml" launch -n 2 -- sh -c \
      "exec '$distml' train --config '$dir/lenet.toml' --set train.seed=\$OMPI_COMM_WORLD_RANK"
    # Strategy keys that do not fit the run.
    expect 2 "strategy.servers = 2 must leave at least one of the 2 ranks a worker" train --np 2 \
      --set strategy.name=ps --set strategy.servers=2
    expect 2 "key 'strategy.mode' must be one of bsp, asp, ssp" train --set strategy.mode=hogwild
    expect 2 "key 'strategy.period' must be an integer >= 1, got 0" train \
      --set strategy.name=local_sgd --set strategy.period=0
    expect 2 "EASGD needs alpha x world size <= 1" train --np 4 --set strategy.name=easgd \
      --set strategy.alpha=0.5
    expect 2 "train.slow_rank = 3 is not a rank of this run" train --np 2 --set train.slow_rank=3
    ;;
  strategies)
    engine=$1 np=$2
    shift 2
    (($# > 0)) || set -- "ps --set strategy.mode=bsp" "ps --set strategy.mode=asp" \
      "ps --set strategy.mode=ssp --set train.slow_rank=0 --set train.slow_factor=3" \
      local_sgd post_local_sgd easgd "easgd --set strategy.asynchronous=true" \
      "gossip --set strategy.topology=exponential" "zero --set strategy.stage=2"
    for s in "$@"; do
      # shellcheck disable=SC2086  # a word list on purpose
      out=$("$distml" train --config "$dir/lenet.toml" --engine "$engine" --np "$np" --json \
        --set strategy.period=2 --set strategy.warmup_steps=3 --set strategy.alpha=0.2 \
        --set strategy.name=$s | tail -n 1) || fail "strategy $s failed: $out"
      [[ $(field "$out" steps) == 8 ]] || fail "strategy $s: $out"
      echo "ok: $s: $out"
    done
    ;;
  pipeline)
    engine=$1
    shift
    (($# > 0)) || set -- gpipe 1f1b recompute profile tensor grid ddg
    # run NAME ARGS...: the done line; the model exported to $dir/NAME.pt
    run() {
      local name=$1
      shift
      "$distml" train --config "$dir/lenet.toml" --json --set train.dtype=float64 \
        --set train.export="\"$dir/$name.pt\"" "$@" | tee "$dir/run.jsonl" | tail -n 1
    }
    plain=$(run plain --engine "$engine" --np 2) || fail "plain data parallelism failed: $plain"
    exports=()  # reference and split, pairs of exported models compared at the end
    for split in "$@"; do
      stages=2 tensor=1 micro=3 schedule=1f1b recompute=false partition='"balanced"'
      case $split in
        gpipe) schedule=gpipe ;;
        1f1b) ;;
        recompute) schedule=gpipe recompute=true ;;
        profile) partition='"profile"' ;;
        tensor) stages=1 tensor=2 ;;
        grid) tensor=2 ;;
        ddg) schedule=ddg micro=1 ;;
        *) fail "unknown split $split" ;;
      esac
      args=(--np $((2 * stages * tensor)) --set parallel.pipeline_stages=$stages
        --set parallel.tensor=$tensor --set parallel.micro_batches=$micro
        --set parallel.schedule=$schedule --set parallel.recompute=$recompute
        --set parallel.partition="$partition")
      # lenet5 has no BatchNorm: the stages' micro-batches give the whole batch's gradient, and
      # the tensor ranks' slices the whole layers', so the run follows plain data parallelism
      # on the same global batch (2 replicas x 16) up to float64 rounding, about 1e-15 of the
      # loss per step. The 8 steps move the test loss by 1e-5 of itself (measured against
      # lr = 1e-12), so 1e-9 is far above rounding and far below what a micro-batch weighted
      # wrong, or a slice's updates lost, would change.
      # ddg's delayed gradients follow another trajectory (tests/train/ddg_test.cc checks it
      # against its reference); here the same run on the in-process engine is the reference,
      # so that the engine's transport (the delayed gradients in flight across steps, the
      # drain at the end) is checked with the same bound.
      reference=$plain want=plain
      if [[ $split == ddg ]]; then
        reference=$(run ddg_reference --engine local "${args[@]}") ||
          fail "ddg on local ranks failed: $reference"
        want=ddg_reference
      fi
      out=$(run "$split" --engine "$engine" "${args[@]}") || fail "split $split failed: $out"
      exports+=("$dir/$want.pt" "$dir/$split.pt")
      "$python" - "$reference" "$out" "$stages" "$tensor" "$dir/run.jsonl" <<'PY' ||
import json, sys
plain, piped = (json.loads(a) for a in sys.argv[1:3])
stages, tensor = (int(a) for a in sys.argv[3:5])
# Each step's time per stage, in the stage_steps events (--json).
events = [json.loads(l) for l in open(sys.argv[5])]
timed = [s for e in events if e["event"] == "stage_steps" for s in e["steps"]]
assert [s["step"] for s in timed] == list(range(1, 9)), timed
assert all(len(s["compute_s"]) == len(s["wait_s"]) == stages for s in timed), timed
p = piped["pipeline"]
assert piped["steps"] == 8 and p["replicas"] == 2, piped
assert p["stages"] == stages and p["tensor"] == tensor, p
assert [s["stage"] for s in p["per_stage"]] == list(range(stages)), p
assert sum(s["layers"] for s in p["per_stage"]) == 5, p
assert all(s["compute_s"] > 0 for s in p["per_stage"]), p
assert stages == 1 or all(s["bytes_sent"] > 0 for s in p["per_stage"]), p
if p["schedule"] == "ddg":  # stage s holds the batches of its last S - s steps
    assert p["micro_batches"] == 1, p
    assert [s["peak_micro_batches"] for s in p["per_stage"]] == [2, 1], p
rel = abs(piped["test_loss"] - plain["test_loss"]) / plain["test_loss"]
assert rel < 1e-9, (rel, plain["test_loss"], piped["test_loss"])
print("ok:", sys.argv[3:5], p["schedule"], "test_loss", piped["test_loss"], "vs", plain["test_loss"], rel)
PY
        fail "split $split differs from its reference"
    done
    # The stages hold only their own layers: the test loss above came through the pipeline,
    # and each export from rank 0 gathering the stages; compared with the same bound.
    "$python" - "${exports[@]}" <<'PY' || fail "an export differs from its reference's"
import sys, torch
for want_path, got_path in zip(sys.argv[1::2], sys.argv[2::2]):
    want, got = torch.load(want_path), torch.load(got_path)
    assert want.keys() == got.keys(), (got_path, want.keys(), got.keys())
    for name in want:
        scale = want[name].abs().max().item()
        assert (got[name] - want[name]).abs().max().item() <= 1e-9 * scale, (got_path, name)
print("ok: the exports equal their references':", len(sys.argv) // 2)
PY
    # The refusals below, and the budget, do not depend on the engine: checked once, on ranks
    # that are threads (a process launch per check cost ~15 s over mpi).
    [[ $engine == mpi ]] || exit 0
    expect 2 "parallel.pipeline_stages = 2 x parallel.tensor = 1 does not divide the 3 ranks" \
      "$distml" train --config "$dir/lenet.toml" --engine local --np 3 \
      --set parallel.pipeline_stages=2
    expect 2 "holds batches and gradients across steps, which a checkpoint does not save yet" \
      "$distml" train --config "$dir/lenet.toml" --engine local --np 2 \
      --set parallel.pipeline_stages=2 --set parallel.schedule=ddg --resume "$dir/no-checkpoint"
    expect 2 "char_lstm' is not a sequence of layers" \
      "$distml" train --config "$dir/lenet.toml" --engine local --np 2 \
      --set parallel.pipeline_stages=2 --set model.name=char_lstm --set data.dataset=text \
      --set data.path="\"$here/cli_lib.sh\""
    # lenet5's 61,706 parameters exceed a budget of 55,000 on one rank; cut in 2 stages
    # (50,692 + 11,014) they fit, and the done line says what each stage trains.
    expect 2 "the model does not fit one rank; cut it into stages" \
      "$distml" train --config "$dir/lenet.toml" --engine local --np 2 \
      --set parallel.max_stage_params=55000
    out=$(run budget --engine local --np 2 --set parallel.max_stage_params=55000 \
      --set parallel.pipeline_stages=2) ||
      fail "a model within the budget when cut failed: $out"
    "$python" - "$out" <<'PY' || fail "budget: $out"
import json, sys
p = json.loads(sys.argv[1])["pipeline"]
assert p["max_stage_params"] == 55000, p
assert [s["parameters"] for s in p["per_stage"]] == [50692, 11014], p
print("ok: each stage within the budget:", [s["parameters"] for s in p["per_stage"]])
PY
    expect 2 "model \"resnet20\" has no pair of consecutive Linear layers" \
      "$distml" train --config "$dir/lenet.toml" --engine local --np 2 \
      --set parallel.tensor=2 --set model.name=resnet20
    ;;
  plan)
    out=$("$distml" plan --config "$dir/lenet.toml" --engine local --np 2 --json \
      --micro-batches auto --measure --measure-steps 3 --reps 1) || fail "plan failed: $out"
    "$python" - "$out" <<'PY' || fail "plan: $out"
import json, sys
plan, done = (json.loads(l) for l in sys.argv[1].splitlines()[-2:])
assert plan["event"] == "plan" and done["event"] == "done", (plan, done)
cands = plan["candidates"]
assert {c["stages"] for c in cands} == {1, 2}, cands
for c in cands:
    assert len(c["partition"]) == c["stages"] and sum(c["partition"]) == 5, c
    assert c["stages"] * c["replicas"] == 2 and c["predicted_step_s"] > 0, c
best = max(cands, key=lambda c: c["predicted_samples_per_s"])
assert done["chosen"] == best, (done["chosen"], best)
assert done["measured_step_s"] > 0 and plan["link_measured"], done
print("ok: plan chose", best, "measured", done["measured_step_s"])
PY
    expect 2 "--latency-us and --bandwidth-mbps go together" \
      "$distml" plan --config "$dir/lenet.toml" --engine local --latency-us 5
    expect 2 "3 stages do not divide the 2 ranks" \
      "$distml" plan --config "$dir/lenet.toml" --engine local --np 2 --stages 3
    expect 2 "--micro-batches: expected \"auto\" or counts >= 1" \
      "$distml" plan --config "$dir/lenet.toml" --engine local --micro-batches 0,4
    expect 2 "--search: sq not in {dp,rl}" \
      "$distml" plan --config "$dir/lenet.toml" --engine local --search sq
    # A placement learnt for a slow rank: an "rl" candidate beside the dynamic programming's,
    # as fast or faster in the simulation that rewards it (it plays every placement of 5 layers
    # on 2 stages and keeps the fastest; the dynamic programming's is one of them).
    out=$("$distml" plan --config "$dir/lenet.toml" --engine local --np 2 --json --stages 2 \
      --reps 1 --search rl --set train.slow_rank=1 --set train.slow_factor=3) ||
      fail "plan --search rl failed: $out"
    "$python" - "$out" <<'PY' || fail "plan --search rl: $out"
import json, sys
plan, done = (json.loads(l) for l in sys.argv[1].splitlines()[-2:])
assert plan["slow_rank"] == 1 and plan["slow_factor"] == 3, plan
by = {c["search"]: c for c in plan["candidates"]}
assert set(by) == {"dp", "rl"}, plan["candidates"]
assert by["rl"]["predicted_step_s"] <= by["dp"]["predicted_step_s"] * (1 + 1e-12), by
assert sum(by["rl"]["partition"]) == 5 and len(by["rl"]["partition"]) == 2, by
print("ok: placements", by["dp"]["partition"], "(dp) and", by["rl"]["partition"], "(rl)")
PY
    # ddg runs whole batches: one candidate per grid, micro-batch count 1, and it trains.
    out=$("$distml" plan --config "$dir/lenet.toml" --engine local --np 2 --json --stages 2 \
      --micro-batches auto --measure --measure-steps 3 --reps 1 --set parallel.schedule=ddg) ||
      fail "plan for ddg failed: $out"
    "$python" - "$out" <<'PY' || fail "plan for ddg: $out"
import json, sys
plan, done = (json.loads(l) for l in sys.argv[1].splitlines()[-2:])
assert [c["micro_batches"] for c in plan["candidates"]] == [1], plan["candidates"]
assert done["measured_step_s"] > 0, done
print("ok: ddg planned", done["chosen"], "measured", done["measured_step_s"])
PY
    ;;
  pipeline-stall)
    engine=$1
    # The run's processes carry this run's directory in their environment, so that a test
    # running beside this one cannot have its rank 1 stopped instead.
    DISTML_TEST_RUN=$dir "$distml" train --config "$dir/lenet.toml" --engine "$engine" --np 2 \
      --json --set parallel.pipeline_stages=2 --set train.max_steps=1000000 \
      --set train.log_every=1 --set train.timeout_s=3 >"$dir/stall.out" 2>&1 &
    job=$!
    # This run's processes (ranks that train run distml-torch, which distml hands train to);
    # with RANK, the one of that rank.
    ranks="$distml(-torch)? train"
    run_processes() {
      for p in $(pgrep -f "$ranks"); do
        env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)
        grep -qxF "DISTML_TEST_RUN=$dir" <<<"$env" &&
          grep -qxE "${1:-.*}" <<<"$env" && echo "$p"
      done
    }
    # A failing check must not leave the run training (it would run on for a million steps).
    trap 'kill -KILL $(run_processes) 2>/dev/null; rm -rf "$dir"' EXIT
    for ((i = 0; i < 300; ++i)); do  # until it trains
      grep -q '"event":"step"' "$dir/stall.out" && break
      sleep 0.1
    done
    grep -q '"event":"step"' "$dir/stall.out" || fail "no step: $(cat "$dir/stall.out")"
    # Stage 1 is rank 1: the process whose launcher gave it rank 1.
    stage1=$(run_processes "RANK=1|OMPI_COMM_WORLD_RANK=1" | tail -n 1)
    [[ -n $stage1 ]] || fail "found no rank 1 among $(pgrep -f "$ranks")"
    kill -STOP "$stage1"
    start=$SECONDS
    wait "$job"
    rc=$?
    kill -KILL "$stage1" 2>/dev/null
    elapsed=$((SECONDS - start))
    [[ $rc -ne 0 ]] || fail "the run went on with a stopped stage"
    ((elapsed < 30)) || fail "the run took ${elapsed}s to end after the stage stopped"
    grep -qE "pipeline stage 0 \(rank 0\) waiting for (the (gradients|activations) of micro-batch [0-9]+ from stage 1 \(rank 1\)|the other stages [a-z ]+|its sends to its neighbours to arrive)" \
      "$dir/stall.out" || fail "no message naming the stages: $(cat "$dir/stall.out")"
    echo "ok: exit $rc after ${elapsed}s: $(grep -m1 'pipeline stage 0' "$dir/stall.out")"
    ;;
  *) fail "unknown scenario $scenario" ;;
esac
