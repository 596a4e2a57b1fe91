"""Tables of bench/strategies.sh: time to 98% test accuracy, payload bytes sent per worker,
final accuracy; the straggler runs; ZeRO's optimizer state against plain Adam. Then the
targets of the strategies issue, each with its numbers and whether it is met."""
import json
import os
import sys

TARGET = 0.98


def load(folder, name):
    path = os.path.join(folder, name + ".jsonl")
    if not os.path.exists(path):
        return None
    events = [json.loads(line) for line in open(path) if line.startswith("{")]
    run = {"evals": [e for e in events if e.get("event") == "eval"]}
    for e in events:
        if e.get("event") in ("done", "command"):
            run[e["event"]] = e
    return run


def time_to_target(run):
    for e in run["evals"]:
        if e["test_accuracy"] >= TARGET:
            return e["train_s"]
    d = run["done"]  # the final evaluation: its training time is the whole loop's
    return d["steps"] / d["steps_per_sec"] if d["test_accuracy"] >= TARGET else None


def fmt_time(t):
    return "not reached" if t is None else f"{t:.0f}"


def row(name, run):
    d = run["done"]
    t = time_to_target(run)
    mb = d["bytes_sent"] / 2**20
    extra = f"{d['consensus_distance']:.3g}" if d.get("consensus_distance", 0) > 0 else ""
    print(f"| {name} | {fmt_time(t)} | {mb:.0f} | {100 * d['test_accuracy']:.2f}% | "
          f"{d['steps_per_sec']:.1f} | {extra} |")
    return t, d


def main():
    folder = sys.argv[1]
    names = ["allreduce", "ps_bsp", "ps_asp", "ps_ssp3", "local_sgd_h8", "post_local_sgd",
             "easgd_sync", "easgd_async", "gossip_ring", "gossip_exponential", "zero1", "zero2"]
    slow = ["slow_allreduce", "slow_local_sgd_h8", "slow_ps_bsp", "slow_ps_asp", "slow_ps_ssp3"]
    runs = {n: load(folder, n)
            for n in names + slow + ["adam_state_allreduce", "adam_state_zero1"]}
    print(f"| strategy | s to {100 * TARGET:.0f}% | MiB sent per worker | final accuracy | "
          "steps/s | consensus distance |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in names + slow:
        if runs[n]:
            row(n, runs[n])
    print()
    a, l = runs["allreduce"], runs["local_sgd_h8"]
    if a and l:
        ratio = a["done"]["bytes_sent"] / l["done"]["bytes_sent"]
        gap = 100 * (a["done"]["test_accuracy"] - l["done"]["test_accuracy"])
        reached = time_to_target(l) is not None or l["done"]["test_accuracy"] >= TARGET
        met = ratio >= 4 and gap <= 0.3 and reached
        print(f"- local_sgd H=8: {ratio:.1f}x fewer bytes than allreduce, {gap:+.2f} points "
              f"below it, target {'reached' if reached else 'not reached'} "
              f"(want >= 4x, <= 0.3 points): {'met' if met else 'NOT met'}")
    bsp = runs["slow_ps_bsp"]
    for n in ["slow_ps_asp", "slow_ps_ssp3"]:
        if bsp and runs[n]:
            t, t_bsp = time_to_target(runs[n]), time_to_target(bsp)
            met = t is not None and (t_bsp is None or t < t_bsp)
            print(f"- one worker 2x slow, s to {100 * TARGET:.0f}%: {n[5:]} {fmt_time(t)}, "
                  f"ps_bsp {fmt_time(t_bsp)} (want less than bsp): {'met' if met else 'NOT met'}")
    s, z = runs["adam_state_allreduce"], runs["adam_state_zero1"]
    if s and z:
        share = z["done"]["optimizer_state_bytes"] / s["done"]["optimizer_state_bytes"]
        print(f"- zero stage 1, Adam state per rank: {100 * share:.1f}% of unsharded "
              f"(want <= 30%): {'met' if share <= 0.30 else 'NOT met'}")
    print()
    for n, r in runs.items():
        if r and "command" in r:
            print(f"  {n}: distml {r['command']['command']}")


main()
