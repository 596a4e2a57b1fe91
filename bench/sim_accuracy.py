"""The simulator against measured step times on emulated hosts (docs/simulator.md, issue grid):
LeNet-5 on MNIST over gloo, for allreduce, ps (bsp), local_sgd and a 2-stage 1f1b pipeline, on
emulated clusters of 2x1, 2x2, 3x1 and 4x1 hosts at 100 Mbit/s and 1 Gbit/s (the pipeline
where 2 stages divide the ranks). Each point `--reps` times: a profile of a one-rank run, then
the cluster's run (the done line's steps per second), then `distml simulate` for the same
config from that profile with the emulated links' model. The profile is taken again each time
because this shared machine's speed drifts by tens of percent between minutes. Prints each
point, the geomean and largest error (median prediction against median measurement), and
whether the order of the strategies' throughput (samples per second) is the measured one at
every cluster; writes it all to --out as JSON.

Usage: sim_accuracy.py DISTML [--reps N] [--steps N] [--out FILE] [--sizes 2x1,...]
       [--rates 100mbit,1gbit] [--strategies allreduce,ps,local_sgd,pipeline]
(gossip, easgd, fp16 and topk can be named too)
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "examples", "mnist_lenet.toml")
STRATEGIES = {
    "allreduce": [],
    "ps": ["strategy.name=ps", "strategy.mode=bsp"],
    "local_sgd": ["strategy.name=local_sgd", "strategy.period=8"],
    "pipeline": ["parallel.pipeline_stages=2", "parallel.schedule=1f1b"],
    # Beyond the grid (--strategies gossip,easgd,fp16,topk):
    "gossip": ["strategy.name=gossip", "strategy.topology=ring"],
    "easgd": ["strategy.name=easgd", "strategy.period=8", "strategy.alpha=0.1"],
    "fp16": ["compress.name=fp16"],
    "topk": ["compress.name=topk", "compress.ratio=0.01"],
}
GRID = "allreduce,ps,local_sgd,pipeline"
# The emulated links' model (docs/simulator.md, "Links shaped by a token bucket"): read off
# `distml bench allreduce` and `distml bench sendrecv` on them, not fitted to step times.
EMULATED = ["--shared-cores", "2", "--burst", "emulated", "--burst-rate", "2800mbit",
            "--latency", "35us", "--p2p-overhead", "15us"]


def sets(args):
    return [x for s in args for x in ("--set", s)]


def last_json(text, what):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"{what}: no JSON line in\n{text}")


def batches_per_step(strategy, ranks):
    return {"ps": ranks - 1, "pipeline": ranks // 2}.get(strategy, ranks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("distml")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--out", default="sim_accuracy.json")
    ap.add_argument("--sizes", default="2x1,2x2,3x1,4x1")
    ap.add_argument("--rates", default="100mbit,1gbit")
    ap.add_argument("--strategies", default=GRID)
    a = ap.parse_args()
    distml = os.path.abspath(a.distml)
    common = ["--config", CONFIG, "--set", f"train.max_steps={a.steps}"]
    with tempfile.TemporaryDirectory() as d:
        profile = os.path.join(d, "p.json")
        points = []
        for size in a.sizes.split(","):
            hosts, per_host = (int(x) for x in size.split("x"))
            for rate in a.rates.split(","):
                for strategy in a.strategies.split(","):
                    if strategy == "pipeline" and hosts * per_host % 2:
                        continue  # 2 stages do not divide the ranks
                    extra = sets(STRATEGIES[strategy])
                    measured, predicted = [], []
                    for _ in range(a.reps):
                        subprocess.run([distml, "train", *common, "--engine", "gloo", "--np", "1",
                                        "--profile", profile], check=True, capture_output=True,
                                       timeout=600)
                        p = subprocess.run(
                            [distml, "launch", "--netns-cluster", size, "--bandwidth", rate,
                             "--engine", "gloo", "--", distml, "train", *common, *extra,
                             "--json"], capture_output=True, text=True, timeout=900)
                        if p.returncode != 0:
                            sys.exit(f"{size} {rate} {strategy}: exit {p.returncode}\n{p.stderr}")
                        measured.append(1 / last_json(p.stdout, "train")["steps_per_sec"])
                        p = subprocess.run(
                            [distml, "simulate", "--profile", profile, *common, *extra,
                             "--hosts", str(hosts), "--ranks-per-host", str(per_host),
                             "--bandwidth", rate, *EMULATED, "--json"],
                            capture_output=True, text=True, timeout=120)
                        if p.returncode != 0:
                            sys.exit(f"simulate {size} {rate} {strategy}: {p.stderr}")
                        predicted.append(json.loads(p.stdout.splitlines()[0])["step_s"])
                    m, pr = statistics.median(measured), statistics.median(predicted)
                    point = {"size": size, "rate": rate, "strategy": strategy,
                             "measured_s": measured, "predicted_s": pr, "predictions_s": predicted,
                             "error": pr / m - 1,
                             "batches": batches_per_step(strategy, hosts * per_host)}
                    points.append(point)
                    print(f"{size:>4} {rate:>7} {strategy:>10}: measured "
                          f"{', '.join(f'{x * 1e3:.2f}' for x in measured)} ms, predicted "
                          f"{', '.join(f'{x * 1e3:.2f}' for x in predicted)} ms, "
                          f"{100 * point['error']:+.1f}%", flush=True)
    errors = [abs(p["error"]) for p in points]
    geomean = math.exp(statistics.mean(math.log(max(e, 1e-6)) for e in errors))
    kept = []
    for size in a.sizes.split(","):
        for rate in a.rates.split(","):
            here = [p for p in points if p["size"] == size and p["rate"] == rate]
            by = lambda key: [p["strategy"] for p in sorted(
                here, key=lambda p: -p["batches"] / key(p))]
            same = by(lambda p: statistics.median(p["measured_s"])) == \
                by(lambda p: p["predicted_s"])
            kept.append(same)
            if not same:
                print(f"{size} {rate}: order measured {by(lambda p: statistics.median(p['measured_s']))}, "
                      f"predicted {by(lambda p: p['predicted_s'])}")
    summary = {"geomean_error": geomean, "largest_error": max(errors),
               "within_15": sum(e <= 0.15 for e in errors), "points": len(points),
               "order_kept": sum(kept), "clusters": len(kept)}
    print(json.dumps(summary))
    with open(a.out, "w") as f:
        json.dump({"summary": summary, "points": points}, f, indent=1)


if __name__ == "__main__":
    main()
