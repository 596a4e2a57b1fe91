"""`distml train|rl --timeline FILE` as users run it: the trace file is valid Chrome-trace JSON,
one named process per rank, and its spans agree with the run's metrics.

Usage: timeline_cli.py DISTML train ENGINE | rl ENGINE
"""
import bisect
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import distml_cli  # noqa: E402

# The file writes times as whole nanoseconds in microseconds with three decimals, so a span
# nested in another is inside it exactly; reading them as doubles (values up to ~1e8 us, 53-bit
# mantissas) moves them by under 1e-8 us. Half a nanosecond covers both.
NESTED_US = 0.0005

# Spans of the trainer's "main" lane that nest inside a step.
IN_STEP = {"data", "forward", "backward", "grad_sync", "wait", "optimizer", "model_sync", "log"}


def fail(message):
    sys.exit(f"FAIL: {message}")


def load_trace(path):
    with open(path) as f:
        trace = json.load(f)  # valid JSON, or the test fails here
    if trace.get("displayTimeUnit") != "ms" or not isinstance(trace.get("traceEvents"), list):
        fail(f"not a trace-event file: {list(trace)}")
    return trace


def check_processes(trace, ranks):
    """One process per rank, named "rank N"; every lane named; every span well formed.
    Returns {(pid, lane name): [spans sorted by ts]}."""
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    processes = [e for e in events if e["name"] == "process_name"]
    if len(processes) != ranks or names != {r: f"rank {r}" for r in range(ranks)}:
        fail(f"expected one process per rank 0..{ranks - 1}, got {processes}")
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    spans = {}
    for e in events:
        if e["ph"] == "M":
            continue
        if e["ph"] != "X" or e["pid"] not in names or (e["pid"], e["tid"]) not in lanes:
            fail(f"event outside a named process and lane: {e}")
        if not e["dur"] >= 0:
            fail(f"negative duration: {e}")
        spans.setdefault((e["pid"], lanes[(e["pid"], e["tid"])]), []).append(e)
    for lane in spans.values():
        lane.sort(key=lambda e: e["ts"])
    errors = trace["otherData"]["clock_error_us"]
    if len(errors) != ranks or errors[0] != 0 or not all(x >= 0 for x in errors):
        fail(f"clock error bounds: {errors}")
    return spans, errors


def containing(outer, event):
    """The span of `outer` (sorted, not overlapping) that holds `event`, or None."""
    i = bisect.bisect_right([o["ts"] for o in outer], event["ts"] + NESTED_US) - 1
    if i < 0:
        return None
    o = outer[i]
    inside = (event["ts"] >= o["ts"] - NESTED_US and
              event["ts"] + event["dur"] <= o["ts"] + o["dur"] + NESTED_US)
    return o if inside else None


def check_train(distml, engine):
    steps, log_every = 12, 4
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(HERE, "make_idx.py"), f"{d}/data"],
                       check=True)
        with open(f"{d}/lenet.toml", "w") as f:
            f.write(f'[data]\ndataset = "mnist"\npath = "{d}/data"\n[model]\nname = "lenet5"\n'
                    f'[optim]\nname = "sgd"\nlr = 0.05\nmomentum = 0.9\n'
                    f'[train]\nbatch_size = 16\nmax_steps = {steps}\nlog_every = {log_every}\n'
                    f'eval_every = 6\ncheckpoint_every = 5\ncheckpoint_dir = "{d}/ck"\n')
        p = distml_cli.run(distml, "--config", f"{d}/lenet.toml", "--engine", engine, "--np", "2",
                           "--json", "--timeline", f"{d}/trace.json")
        done = distml_cli.done_line(p)
        spans, _ = check_processes(load_trace(f"{d}/trace.json"), 2)

    for rank in range(2):
        main = spans.get((rank, "main"), [])
        by_name = {}
        for e in main:
            by_name.setdefault(e["name"], []).append(e)
        step_spans = by_name.get("step", [])
        if len(step_spans) != done["steps"]:
            fail(f"rank {rank}: {len(step_spans)} step spans, the done line says {done['steps']}")
        if [e["args"]["step"] for e in step_spans] != list(range(1, steps + 1)):
            fail(f"rank {rank}: steps out of order: {[e['args'] for e in step_spans]}")
        for name in ("forward", "backward", "grad_sync", "optimizer"):
            if len(by_name.get(name, [])) != steps:  # train.accumulate = 1: one of each per step
                fail(f"rank {rank}: {len(by_name.get(name, []))} '{name}' spans, not {steps}")
        # One wait per step, and one more where the loader hands over its end-of-epoch marker.
        if len(by_name.get("data", [])) < steps:
            fail(f"rank {rank}: {len(by_name.get('data', []))} data spans for {steps} steps")
        # Evaluations at step 6 and at the end; checkpoints at 5 and 10 and at the end.
        if len(by_name.get("eval", [])) != 2 or len(by_name.get("checkpoint", [])) != 3:
            fail(f"rank {rank}: eval {by_name.get('eval')} checkpoint {by_name.get('checkpoint')}")
        for e in main:
            if e["name"] in IN_STEP and containing(step_spans, e) is None:
                fail(f"rank {rank}: '{e['name']}' is not inside a step: {e}")
        # Each bucket's all-reduce complete before its step ends. lenet5's gradients are one
        # bucket, the last, which nothing is left to overlap: it is launched in the step's
        # wait, after backward (the earlier buckets of larger models go during backward).
        buckets = [e for (pid, lane), es in spans.items() if pid == rank and
                   lane.startswith("bucket ") for e in es]
        if not buckets or any(e["name"] != "allreduce" for e in buckets):
            fail(f"rank {rank}: bucket lanes hold {buckets[:3]}")
        if len(buckets) != steps * len({lane for (pid, lane) in spans
                                         if pid == rank and lane.startswith("bucket ")}):
            fail(f"rank {rank}: {len(buckets)} bucket all-reduces for {steps} steps")
        for e in buckets:
            if containing(step_spans, e) is None:
                fail(f"rank {rank}: all-reduce outside its step: {e}")
            launch = dict(e, dur=0)
            if containing(by_name["wait"], launch) is None:
                fail(f"rank {rank}: the last bucket's all-reduce not launched in the wait: {e}")

    # Rank 0's steps, evaluations and checkpoints in the loop and "loop_end" tile the training
    # loop without gaps, and the steps with loop_end are its time: steps / steps_per_sec (which
    # leaves evaluation and checkpoints out). Both come from the same clock readings; the
    # trainer sums them as doubles (relative rounding ~1e-16 per operation, a few dozen
    # operations), the file as whole nanoseconds: 1e-9 relative is far above that, and far
    # below one step (a missing step is ~1e-2 of the loop).
    main = spans[(0, "main")]
    loop_end = next(e for e in main if e["name"] == "loop_end")
    tiles = [e for e in main if e["name"] in ("step", "eval", "checkpoint", "loop_end") and
             e["ts"] <= loop_end["ts"]]
    for before, after in zip(tiles, tiles[1:]):
        if abs(before["ts"] + before["dur"] - after["ts"]) > 2 * NESTED_US:
            fail(f"a gap or overlap between {before} and {after}")
    loop_us = sum(e["dur"] for e in tiles if e["name"] in ("step", "loop_end"))
    want_us = done["steps"] / done["steps_per_sec"] * 1e6
    if abs(loop_us - want_us) > 1e-9 * want_us + len(tiles) * NESTED_US:
        fail(f"steps and loop_end last {loop_us} us; steps / steps_per_sec is {want_us} us")
    print(f"ok: train over {engine}: {steps} steps per rank; the steps and loop_end last "
          f"{loop_us:.3f} us, steps / steps_per_sec is {want_us:.3f} us")


def check_rl(distml, engine):
    quick = ["--set", "run.env_steps=2000", "--set", "run.eval_episodes=2", "--set",
             "run.log_every=0"]
    for algo, actor_rank in (("impala", 1), ("ppo", 0)):
        with tempfile.TemporaryDirectory() as d:
            cmd = [distml, "rl", algo, "--env", "cartpole", "--engine", engine, "--np", "2",
                   "--json", "--timeline", f"{d}/trace.json", *quick]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            done = json.loads(p.stdout.strip().splitlines()[-1])
            spans, clock_error_us = check_processes(load_trace(f"{d}/trace.json"), 2)
        rollouts = [e for e in spans.get((actor_rank, "actor"), []) if e["name"] == "rollout"]
        updates = [e for e in spans.get((0, "learner"), []) if e["name"] == "update"]
        if not rollouts:
            fail(f"{algo}: no rollouts on rank {actor_rank}'s actor lane: {list(spans)}")
        if not updates:
            fail(f"{algo}: no updates on rank 0's learner lane: {list(spans)}")
        # ppo: one rollout and one update per update; impala: each update takes
        # impala.batch_unrolls rollouts, and none is trained on before it was collected.
        n_updates = done["updates"]
        if algo == "ppo" and (len(rollouts) != n_updates or len(updates) != n_updates):
            fail(f"ppo: {len(rollouts)} rollouts, {len(updates)} updates, done line {done}")
        if algo == "impala":
            if len(updates) != n_updates:
                fail(f"impala: {len(updates)} update spans, done line {done}")
            if not any(e["name"] == "queue_wait" for lane in spans.values() for e in lane):
                fail("impala: no queue waits")
            # Across ranks: the actor's times are off by at most its clock's bound.
            first_rollout_end = rollouts[0]["ts"] + rollouts[0]["dur"]
            margin = clock_error_us[actor_rank] + NESTED_US
            if updates[0]["ts"] + margin < first_rollout_end:
                fail(f"impala: an update {updates[0]} before the first rollout {rollouts[0]}")
        print(f"ok: rl {algo} over {engine}: {len(rollouts)} rollouts, {len(updates)} updates")


def main():
    distml, what, engine = sys.argv[1:4]
    if what == "train":
        check_train(distml, engine)
    elif what == "rl":
        check_rl(distml, engine)
    else:
        fail(f"unknown scenario {what}")


if __name__ == "__main__":
    main()
