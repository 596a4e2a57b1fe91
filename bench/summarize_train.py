"""Prints bench/train_speed.sh's JSON lines as one markdown table per case (model, batch per
rank): median steps/s of distml over mpi, distml over gloo and DDP (gloo) at each world size,
distml's ratios to DDP (gloo / DDP compares like with like: the same transport), and the
weak-scaling efficiency (steps/s at np ranks / steps/s at 1 rank; the batch per rank is fixed,
so 1.00 is perfect). Only the latest run in the file unless --run or --all says otherwise.
Records without an engine (older runs) are distml over mpi."""
import argparse
import json
import statistics
import sys

IMPLS = ("distml", "distml-gloo", "ddp")


def read_records(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"summarize_train: {path}:{number}: {e}")
    return records


def fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def case_table(model, batch, records):
    """The markdown lines for one (model, batch) case."""
    medians = {}  # (impl, np) -> median steps/s
    reps = {}
    for impl in IMPLS:
        for np_ in {r["np"] for r in records}:
            values = [r["steps_per_sec"] for r in records if r["impl"] == impl and r["np"] == np_]
            if values:
                medians[impl, np_] = statistics.median(values)
                reps[impl, np_] = len(values)
    nps = sorted({np_ for _, np_ in medians})
    rep_counts = sorted(set(reps.values()))
    lines = [f"### {model}, batch {batch} per rank "
             f"(median of {'/'.join(map(str, rep_counts))} reps)", "",
             "| np | distml mpi steps/s | distml gloo steps/s | DDP (gloo) steps/s | "
             "mpi / DDP | gloo / DDP | distml mpi scaling | DDP scaling |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for np_ in nps:
        d, g, p = (medians.get((impl, np_)) for impl in IMPLS)
        d_scaling = ratio(d, medians.get(("distml", 1)))
        p_scaling = ratio(p, medians.get(("ddp", 1)))
        lines.append(f"| {np_} | {fmt(d, 1)} | {fmt(g, 1)} | {fmt(p, 1)} | {fmt(ratio(d, p), 2)} | "
                     f"{fmt(ratio(g, p), 2)} | {fmt(d_scaling, 2)} | {fmt(p_scaling, 2)} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("jsonl", nargs="?", default="bench/results/train_speed.jsonl")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--run", help="summarize this run id (default: the file's last)")
    which.add_argument("--all", action="store_true", help="every run in the file together")
    args = p.parse_args()
    records = read_records(args.jsonl)
    if not records:
        sys.exit(f"summarize_train: {args.jsonl} has no results")
    if not args.all:
        run = args.run if args.run is not None else records[-1].get("run")
        records = [r for r in records if r.get("run") == run]
        if not records:
            sys.exit(f"summarize_train: no results of run {run} in {args.jsonl}")
        print(f"Run {run}" + (f", commit {records[0]['commit']}" if "commit" in records[0] else "")
              + f", {records[0].get('steps', '?')} timed steps.\n")
    cases = []  # in first-seen order, as the script ran them
    for r in records:
        if (r["model"], r["batch"]) not in cases:
            cases.append((r["model"], r["batch"]))
    for i, (model, batch) in enumerate(cases):
        if i:
            print()
        case = [r for r in records if r["model"] == model and r["batch"] == batch]
        print("\n".join(case_table(model, batch, case)))


if __name__ == "__main__":
    main()
