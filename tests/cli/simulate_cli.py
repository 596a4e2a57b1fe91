"""`distml train --profile` and `distml simulate` as users run them: the profile a 2-rank gloo
run writes is complete and consistent with the model; the simulator's buckets for that config
are the buckets the run all-reduced (bytes and order, from its timeline's bucket lanes); its
predictions come one per cluster size; and its mistakes are named with exit code 2.

Usage: simulate_cli.py DISTML
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import distml_cli  # noqa: E402


def fail(message):
    sys.exit(f"FAIL: {message}")


def simulate(distml, *args, expect_rc=0):
    p = subprocess.run([distml, "simulate", *args], capture_output=True, text=True, timeout=120)
    if p.returncode != expect_rc:
        fail(f"distml simulate {' '.join(args)} exited {p.returncode}, expected {expect_rc}\n"
             f"{p.stdout}\n{p.stderr}")
    return p


def run_and_simulate(distml, config, profile, ranks, sets):
    """A run of `ranks` ranks over gloo with `sets`, and the simulator's prediction of it on as
    many hosts: the run's done line and the prediction's line."""
    done = distml_cli.run(distml, "--config", config, "--np", str(ranks), "--engine", "gloo",
                          "--json", *sets)
    out = simulate(distml, "--profile", profile, "--config", config, "--hosts", str(ranks),
                   "--bandwidth", "1gbit", "--json", *sets)
    return json.loads(done.stdout.splitlines()[-1]), json.loads(out.stdout.splitlines()[0])


def bucket_bytes_of_run(trace_path):
    """Rank 0's bucket lanes, in order: each bucket's bytes, as its all-reduce spans say."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e["name"] == "thread_name" and e["pid"] == 0}
    sizes = {}
    for e in events:
        if e["ph"] == "X" and e["pid"] == 0 and e["name"] == "allreduce":
            name = lanes[e["tid"]]
            sizes.setdefault(int(name.split()[1]), set()).add(e["args"]["bytes"])
    if not sizes or any(len(s) != 1 for s in sizes.values()):
        fail(f"bucket lanes without one size each: {sizes}")
    return [sizes[b].pop() for b in sorted(sizes)]


def main():
    distml = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(HERE, "make_idx.py"), f"{d}/idx"],
                       check=True, capture_output=True)
        config = f"{d}/lenet.toml"
        with open(config, "w") as f:
            # Small buckets, so that the model's 241 KiB of gradients make several.
            f.write(f'[data]\ndataset = "mnist"\npath = "{d}/idx"\n'
                    '[train]\nbatch_size = 16\nmax_steps = 12\n'
                    '[strategy]\nfirst_bucket_mb = 0.01\nbucket_mb = 0.1\n')
        profile, trace = f"{d}/p.json", f"{d}/run/timeline.json"
        distml_cli.run(distml, "--config", config, "--np", "2", "--engine", "gloo",
                       "--profile", profile, "--run-dir", f"{d}/run", "--timeline")
        with open(profile) as f:
            p = json.load(f)

        # The same run's saved timeline converts into the same profile: its phases are the
        # medians of the same spans (the file's microseconds with three decimals are whole
        # nanoseconds), so they are equal; the layers are measured again.
        converted = f"{d}/converted.json"
        p2 = subprocess.run([distml, "profile", f"{d}/run", "--out", converted],
                            capture_output=True, text=True, timeout=120)
        if p2.returncode != 0:
            fail(f"distml profile: {p2.stderr}")
        with open(converted) as f:
            c = json.load(f)
        same = ["steps", "data_s", "forward_s", "backward_s", "optimizer_s", "other_s", "step_s",
                "eval_s", "world", "engine", "batch_size", "model", "layer_names"]
        if any(c[k] != p[k] for k in same) or \
                [(q["name"], q["bytes"], q["shape"]) for q in c["parameters"]] != \
                [(q["name"], q["bytes"], q["shape"]) for q in p["parameters"]]:
            fail(f"the converted profile differs: {[(k, c[k], p[k]) for k in same if c[k] != p[k]]}")
        print("ok: the run's timeline converts into its profile")

        # The profile: the model's gradients, each ready within backward, earlier layers later.
        lenet5_bytes = 61706 * 4
        got = sum(q["bytes"] for q in p["parameters"])
        if got != lenet5_bytes:
            fail(f"the profile's gradients add up to {got} bytes, LeNet-5 has {lenet5_bytes}")
        if (p["world"], p["engine"], p["batch_size"], p["steps"]) != (2, "gloo", 16, 11):
            fail(f"world, engine, batch, steps: {p['world'], p['engine'], p['batch_size'], p['steps']}")
        for key in ("forward_s", "backward_s", "step_s"):
            if not p[key] > 0:
                fail(f"{key} = {p[key]}")
        ready = [q["ready_s"] for q in p["parameters"]]
        # A ready time is a share of the backward, done / total x backward_s: the last one
        # equals backward_s but for the division's and product's rounding (2^-53 each), which
        # 1e-12 of it covers.
        if any(not 0 < r <= p["backward_s"] * (1 + 1e-12) for r in ready) or \
                ready != sorted(ready, reverse=True):
            fail(f"ready times not within backward, first layer last: {ready}")
        print(f"ok: profile of {len(ready)} parameters, step {p['step_s'] * 1e3:.2f} ms")
        # LeNet-5's layers, measured on the batch of 16 and micro-batches of 8, 4 and 2 rows.
        if p["layer_names"] != ["conv1", "conv2", "fc1", "fc2", "fc3"] or \
                [at["rows"] for at in p["layers"]] != [2, 4, 8, 16] or \
                any(len(at["costs"]) != 5 for at in p["layers"]):
            fail(f"layers: {p['layer_names']}, {[at['rows'] for at in p['layers']]}")
        if sum(c["parameter_bytes"] for c in p["layers"][0]["costs"]) != lenet5_bytes:
            fail("the layers' parameters are not the model's")

        # The simulator's buckets for the same config are the run's.
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "1,2,4",
                       "--bandwidth", "1gbit", "--latency", "50us", "--json")
        events = [json.loads(line) for line in out.stdout.splitlines()]
        if events[-1]["event"] != "done" or events[-1]["sizes"] != 3:
            fail(f"the last line is not the done line: {events[-1]}")
        lines = [e for e in events if e["event"] == "prediction"]
        if [line["hosts"] for line in lines] != [1, 2, 4]:
            fail(f"one line per cluster size: {lines}")
        simulated = [b["bytes"] for b in lines[1]["buckets"]]
        ran = bucket_bytes_of_run(trace)
        if simulated != ran:
            fail(f"buckets simulated {simulated}, the run's {ran}")
        print(f"ok: the simulator's {len(ran)} buckets are the run's: {ran}")
        steps = [line["step_s"] for line in lines]
        if not steps[0] < steps[1] <= steps[2] or lines[0]["bytes_per_link"] != 0:
            fail(f"more hosts on the same link should not be faster: {lines}")
        print(f"ok: predicted steps {[f'{s * 1e3:.2f} ms' for s in steps]}")

        # The link fitted from distml bench sendrecv --json: rows of 50 us + bytes / 1 Gbit/s
        # predict what --latency 50us --bandwidth 1gbit predicts. The fit counts the smallest
        # row's 4 bytes (0.032 us) as latency, which moves a step of milliseconds by under
        # 1e-4 of itself (each all-reduce round pays it once): 1e-3 of the step allows that.
        with open(f"{d}/bench.jsonl", "w") as f:
            for size in (4, 1 << 24):
                f.write(json.dumps({"op": "sendrecv", "bytes": size,
                                    "time_us": 50 + size / 125.0}) + "\n")
            f.write(json.dumps({"event": "done", "op": "sendrecv"}) + "\n")
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "1,2,4",
                       "--link-from", f"{d}/bench.jsonl", "--json")
        fitted = [json.loads(line)["step_s"] for line in out.stdout.splitlines()[:3]]
        if any(abs(a - b) > 1e-3 * b for a, b in zip(fitted, steps)):
            fail(f"steps from the fitted link {fitted}, from --latency and --bandwidth {steps}")
        print("ok: the link fitted from bench rows predicts the same steps")

        # Local SGD: the parameters' one all-reduce every 4 steps, no flag element, a quarter of
        # it a step: what the gradients' buckets send, without their 4 flags, over 4.
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "2",
                       "--bandwidth", "1gbit", "--set", "strategy.name=local_sgd",
                       "--set", "strategy.period=4", "--json")
        local = json.loads(out.stdout.splitlines()[0])
        flags = 4 * len(lines[1]["buckets"])
        # Byte counts and their quarters are exact in doubles (below 2^53) and in JSON, which
        # writes doubles to read back the same: equal exactly; 1e-6 is far below one byte.
        if abs(4 * local["bytes_per_link"] - (lines[1]["bytes_per_link"] - flags)) > 1e-6:
            fail(f"local SGD sends {local['bytes_per_link']} a step; allreduce "
                 f"{lines[1]['bytes_per_link']} with {flags} bytes of flags")
        print(f"ok: local SGD every 4 steps: {local['step_s'] * 1e3:.2f} ms a step")
        # Synchronous EASGD averages as local SGD does (post-local SGD after its warm-up takes
        # the same path).
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "2",
                       "--bandwidth", "1gbit", "--set", "strategy.period=4", "--json",
                       "--set", "strategy.name=easgd", "--set", "strategy.alpha=0.5")
        if json.loads(out.stdout.splitlines()[0])["step_s"] != local["step_s"]:
            fail(f"EASGD predicts {out.stdout.splitlines()[0]}, local SGD {local}")
        print("ok: EASGD averages as local SGD")
        # ZeRO (stage 2): the all-reduce strategy's buckets, padded to whole blocks of 2 ranks
        # (sim.Replay checks both stages' timelines).
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "2",
                       "--bandwidth", "1gbit", "--json", "--set", "strategy.name=zero",
                       "--set", "strategy.stage=2")
        zero = json.loads(out.stdout.splitlines()[0])["buckets"]
        if [b["bytes"] for b in zero] != [8 * -(-b["bytes"] // 8) for b in lines[1]["buckets"]]:
            fail(f"ZeRO's buckets {zero}, allreduce's {lines[1]['buckets']}")
        print("ok: ZeRO reduces the all-reduce strategy's buckets in whole blocks")

        # Gossip: each rank sends its parameters to each neighbour of the run's topology
        # (gossip_offsets): two on a ring of 4, three (1, 2, 4) exponentially on 8. The parameters are the gradients' bytes less the buckets' 4-byte flags.
        parameters = lines[1]["bytes_per_link"] - flags
        for topology, hosts, neighbours in [("ring", 4, 2), ("exponential", 8, 3)]:
            out = simulate(distml, "--profile", profile, "--config", config, "--hosts",
                           str(hosts), "--bandwidth", "1gbit", "--json",
                           "--set", "strategy.name=gossip", "--set",
                           f"strategy.topology={topology}")
            sent = json.loads(out.stdout.splitlines()[0])["bytes_per_link"]
            if sent != neighbours * parameters:
                fail(f"gossip {topology} on {hosts}: {sent} bytes, expected {neighbours} x "
                     f"{parameters}")
        print("ok: gossip sends the parameters to each neighbour of its topology")

        # A pipeline of 2 stages: one per host's pair of ranks, and across hosts.
        out = simulate(distml, "--profile", profile, "--config", config, "--hosts", "1,2",
                       "--ranks-per-host", "2", "--bandwidth", "1gbit", "--json",
                       "--set", "parallel.pipeline_stages=2")
        piped = [json.loads(line) for line in out.stdout.splitlines()][:2]
        if [(line["ranks"], line["bytes_per_link"] > 0) for line in piped] != \
                [(2, False), (4, True)]:
            fail(f"pipelines: {piped}")
        print("ok: a 2-stage pipeline:", [f"{line['step_s'] * 1e3:.2f} ms" for line in piped])

        # Compression: the simulator's compressor sends per step what the run's sent (top-k's
        # values and indices, all-gathered, then the flags), and PowerSGD reads the shapes.
        topk = ["--set", "compress.name=topk", "--set", "compress.ratio=0.01"]
        ran, predicted = run_and_simulate(distml, config, profile, 2, topk)
        sent = sum(b["bytes"] for b in predicted["buckets"])
        if sent * ran["steps"] != ran["bytes_sent"]:
            fail(f"top-k: the run sent {ran['bytes_sent']} bytes in {ran['steps']} steps, the "
                 f"simulator {sent} a step")
        simulate(distml, "--profile", profile, "--config", config, "--hosts", "2",
                 "--bandwidth", "1gbit", "--set", "compress.name=powersgd")
        print(f"ok: top-k sends the run's {sent} bytes a step; PowerSGD is simulated")

        # The parameter server: the simulator's shards are the run's (bytes per server), and
        # a worker pushes each step what the run's worker pushed.
        ps = ["--set", "strategy.name=ps", "--set", "strategy.servers=2"]
        ran, predicted = run_and_simulate(distml, config, profile, 3, ps)
        buckets = predicted["buckets"]
        shards = [sum(b["bytes"] for b in buckets if b["server"] == rank) for rank in (1, 2)]
        if shards != ran["server_bytes"]:
            fail(f"shards simulated {shards} bytes, the run's {ran['server_bytes']}")
        if sum(shards) * ran["steps"] != ran["bytes_sent"]:
            fail(f"the run's worker pushed {ran['bytes_sent']} bytes in {ran['steps']} steps, "
                 f"the simulator's {sum(shards)} a step")
        print(f"ok: the parameter server's shards are the run's: {shards} bytes")

        # Mistakes: each named, exit 2.
        for args, words in [
            (["--profile", f"{d}/none.json", "--bandwidth", "1gbit"], "none.json"),
            (["--profile", trace, "--bandwidth", "1gbit"], "not a distml profile"),
            (["--profile", profile, "--bandwidth", "1gbit", "--set", "strategy.name=ps",
              "--hosts", "3", "--set", "compress.name=fp16"],
             'compress.name = "fp16" is simulated with strategy "allreduce"'),
            (["--profile", profile, "--bandwidth", "1gbit", "--set", "strategy.name=hybrid"],
             'strategy.name = "hybrid" is not simulated yet'),
            (["--profile", profile, "--bandwidth", "1gbit", "--hosts", "16",
              "--set", "strategy.name=easgd"],
             "--hosts 16 with --ranks-per-host 1: "),
            (["--profile", profile, "--bandwidth", "1gbit", "--set", "strategy.name=ps"],
             "--hosts 1 with --ranks-per-host 1: strategy.servers = 1 must leave"),
            (["--profile", profile, "--bandwidth", "1gbit", "--set", "parallel.pipeline_stages=2",
              "--set", "parallel.schedule=pipedream"],
             'distml simulate: parallel.schedule = "pipedream" is not simulated yet'),
            (["--profile", profile, "--bandwidth", "fast"], "fast"),
            (["--profile", profile, "--bandwidth", "1gbit", "--latency", "2 ms"], "2 ms"),
            (["--profile", profile], "--bandwidth is required"),
            (["--profile", profile, "--link-from", f"{d}/bench.jsonl", "--bandwidth", "1gbit"],
             "--link-from fits the link's latency and bandwidth"),
            (["--profile", profile, "--link-from", f"{d}/none.jsonl"], "none.jsonl"),
        ]:
            err = simulate(distml, *args, expect_rc=2).stderr
            if words not in err:
                fail(f"distml simulate {' '.join(args)}: no '{words}' in: {err}")
        print("ok: mistakes named, exit 2")
        os.remove(f"{d}/run/timeline.json")
        bad = subprocess.run([distml, "profile", f"{d}/run", "--out", f"{d}/x.json"],
                             capture_output=True, text=True, timeout=120)
        if bad.returncode != 2 or "timeline.json: cannot read it" not in bad.stderr:
            fail(f"distml profile of a run without its timeline: {bad.returncode} {bad.stderr}")
        bad = distml_cli.run(distml, "--config", config, "--profile", f"{d}/q.json",
                             "--set", "parallel.pipeline_stages=2", "--np", "2", expect_rc=2)
        if "distml plan" not in bad.stderr:
            fail(f"--profile of a pipeline: {bad.stderr}")
        print("ok: a pipeline's profile is refused")
    print("PASSED")


if __name__ == "__main__":
    main()
