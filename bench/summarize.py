"""Prints `distml bench --json` files as one markdown table (used for docs/benchmarks.md)."""
import json
import sys


def fmt_bytes(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


print("| engine | np | algo | bytes | time µs | algbw GB/s | busbw GB/s | MPI_Allreduce µs | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("event") == "done":
            continue
        base = r["baseline_time_us"]
        ratio = r["ratio_vs_baseline"]
        print(f"| {r['engine']} | {r['np']} | {r['algo']} | {fmt_bytes(r['bytes'])} | "
              f"{r['time_us']:.2f} | {r['algbw_gbps']:.3f} | {r['busbw_gbps']:.3f} | "
              f"{'-' if base is None else f'{base:.2f}'} | "
              f"{'-' if ratio is None else f'{ratio:.2f}'} |")
