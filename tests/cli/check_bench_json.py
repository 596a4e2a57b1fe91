"""Checks `distml bench --json` output: the row keys of the issue, sane values, a done line."""
import json
import sys

KEYS = {"op", "engine", "algo", "bytes", "np", "time_us", "algbw_gbps", "busbw_gbps",
        "baseline_time_us", "ratio_vs_baseline"}
want_rows, want_baseline = int(sys.argv[1]), sys.argv[2] == "baseline"
lines = [json.loads(l) for l in sys.stdin if l.startswith("{")]
rows, done = lines[:-1], lines[-1]
assert done.get("event") == "done", f"last line is not the done line: {done}"
assert len(rows) == want_rows, f"expected {want_rows} rows, got {len(rows)}"
for r in rows:
    assert set(r) == KEYS, f"row keys {sorted(r)} != {sorted(KEYS)}"
    assert r["time_us"] > 0 and r["algbw_gbps"] >= 0, r
    if want_baseline:
        assert r["baseline_time_us"] > 0 and r["ratio_vs_baseline"] > 0, r
    else:
        assert r["baseline_time_us"] is None, r
print(f"ok: {len(rows)} rows")
