#!/usr/bin/env python3
"""Markdown tables of bench/rl.sh's results: targets per (algorithm, environment) and seed,
IMPALA decoupling and Ape-X replay throughput."""
import glob
import json
import os
import re
import sys

TARGETS = {"cartpole": 475, "acrobot": -100, "mountaincar": -110, "pendulum": -300,
           "mountaincar_continuous": 90, "humanoid": 600}


def events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def done_of(evs):
    return next(e for e in reversed(evs) if e.get("event") == "done")


def command_of(evs):
    return next((e["command"] for e in evs if e.get("event") == "command"), "")


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def main(d):
    runs = {os.path.basename(p)[: -len(".jsonl")]: events(p) for p in sorted(glob.glob(f"{d}/*.jsonl"))}
    print("| algorithm | env | target | seed | final greedy eval: mean return (episodes) | met | solved at env steps | solved at s | env steps | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, evs in runs.items():
        m = re.fullmatch(r"\w+_s(\d+)", name)
        if not m:
            continue
        seed = m.group(1)
        done = done_of(evs)
        algo, env = done["algo"], done["env"]
        if "_defaults_" in name:
            algo += " (built-in defaults)"
        target = TARGETS.get(env)
        met = "-" if target is None else ("yes" if done["eval_mean_return"] >= target else "**no**")
        print(f"| {algo} | {env} | {target if target is not None else '-'} | {seed} | "
              f"{done['eval_mean_return']:.1f} ({done['eval_episodes']}) | {met} | {done.get('solved_at_env_steps') or '-'} | "
              f"{fmt(done.get('solved_at_s'))} | {done['env_steps']} | {done['wall_s']:.1f} |")
    if "impala_decoupling" in runs:
        done = done_of(runs["impala_decoupling"])
        print(f"\nIMPALA decoupling (`{command_of(runs['impala_decoupling'])}`): actor alone "
              f"{done['actor_steps_per_sec_alone']:.0f} env steps/s, with the learner training "
              f"{done['actor_steps_per_sec']:.0f}; ratio {done['decoupling_ratio']:.3f} (target >= 0.8); "
              f"policy lag mean {done['policy_lag_mean']:.2f}, max {done['policy_lag_max']}")
    if "apex_replay" in runs:
        done = done_of(runs["apex_replay"])
        print(f"\nApe-X replay in a run (`{command_of(runs['apex_replay'])}`): "
              f"{done['replay_ops_per_sec']:.0f} inserts + samples per second on its rank "
              f"(busy {100 * done['replay_busy_fraction']:.0f}% of the time; "
              f"{done['replay_capacity_ops_per_sec']:.0f} per second inside the buffer); target >= 50000")
    if os.path.exists(f"{d}/replay_micro.jsonl"):
        micro = events(f"{d}/replay_micro.jsonl")[-1]
        print(f"\nReplay micro-benchmark (build/bench/distml_replay_throughput): "
              f"{micro['ops_per_sec']:.0f} ops/s")
    if os.path.exists(f"{d}/actor_throughput.jsonl"):
        print("\nOne PPO actor (build/bench/distml_actor_throughput), median of the rounds:")
        for r in events(f"{d}/actor_throughput.jsonl"):
            print(f"  {r['env']}: {r['copies']} copies, env_workers {r['env_workers']}: "
                  f"{r['env_steps_per_sec']:.0f} env steps/s, "
                  f"{r['env_steps_per_sec_per_core']:.0f} per core of {r['cores']}, "
                  f"x{r['ratio_to_first']:.2f} of env_workers 1")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/rl")
