"""`--run-dir` and `distml report` as users run them.

Usage: report_cli.py DISTML SCENARIO
  render    two 2-rank training runs with different strategies into run directories, a report
            of both rendered by headless Chromium: every plot drawn (screenshot pixels), and
            the numbers its marks and its table show equal metrics.jsonl and done.json
  run-dirs  what train, rl and fit write; a finished folder refused; a resumed run's repeated
            steps and restarted clock resolved in the report
  bad-input each bad input is an error naming the file (and line), with exit code 2
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from PIL import Image  # Debian's python3-pil (scripts/setup.sh)

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = shutil.which("chromium")
TIMEOUT_S = 120  # every command; the slowest, a training run, takes about 2 s

# Vega formats a number in a mark's aria-label with 12 significant digits (d3-format's default
# precision), so a shown value v of x has |v - x| <= 0.5 * 10^(e - 11) with 10^e <= |x|: within
# 5e-12 * |x|. A wrong value (another step's, another run's) differs in the 3rd digit or sooner.
SHOWN_REL = 5e-12


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def run(*args, expect_rc=0, env=None):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=TIMEOUT_S,
                       env=env)
    if p.returncode != expect_rc:
        fail(f"{' '.join(map(str, args))} exited {p.returncode}, expected {expect_rc}\n"
             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def expect_error(pattern, *args, env=None):
    p = run(*args, expect_rc=2, env=env)
    if pattern not in p.stderr:
        fail(f"{' '.join(map(str, args))}: stderr lacks {pattern!r}:\n{p.stderr}")
    print(f"ok: exit 2, {pattern!r}")


def close(shown, exact):
    return abs(shown - exact) <= SHOWN_REL * abs(exact)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_config(tmp, steps=12):
    subprocess.run([sys.executable, os.path.join(HERE, "make_idx.py"), f"{tmp}/data"], check=True,
                   timeout=TIMEOUT_S)
    path = f"{tmp}/mlp.toml"
    with open(path, "w") as f:
        f.write(f"""[data]
dataset = "mnist"
path = "{tmp}/data"
[model]
name = "mlp"
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
[train]
batch_size = 16
max_steps = {steps}
log_every = 2
eval_every = 4
""")
    return path


def has_flag(distml, command, flag):
    return flag in run(distml, command, "--help").stdout


# A two-rank trace with spans nested on one lane and a second lane: its self times per rank are
# known by hand (below), so the report's bars are checked against numbers, not a second copy of
# its algorithm. Used where `distml train` has no --timeline yet.
FIXTURE_TRACE = {"traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 1"}},
    {"ph": "X", "name": "step", "pid": 0, "tid": 0, "ts": 0, "dur": 10000},
    {"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1000, "dur": 3000},
    {"ph": "X", "name": "backward", "pid": 0, "tid": 0, "ts": 4000, "dur": 5000},
    {"ph": "X", "name": "allreduce", "pid": 0, "tid": 1, "ts": 5000, "dur": 4500},
    {"ph": "X", "name": "step", "pid": 1, "tid": 0, "ts": 0, "dur": 12000},
    {"ph": "X", "name": "forward", "pid": 1, "tid": 0, "ts": 500, "dur": 2500},
    {"ph": "X", "name": "backward", "pid": 1, "tid": 0, "ts": 3000, "dur": 8000},
    {"ph": "X", "name": "allreduce", "pid": 1, "tid": 1, "ts": 6000, "dur": 6000},
]}
FIXTURE_SECONDS = {  # self time: a step's duration less its forward and backward
    ("rank 0", "thread 0", "step"): 0.002, ("rank 0", "thread 0", "forward"): 0.003,
    ("rank 0", "thread 0", "backward"): 0.005, ("rank 0", "thread 1", "allreduce"): 0.0045,
    ("rank 1", "thread 0", "step"): 0.0015, ("rank 1", "thread 0", "forward"): 0.0025,
    ("rank 1", "thread 0", "backward"): 0.008, ("rank 1", "thread 1", "allreduce"): 0.006,
}


def self_seconds(trace):
    """Seconds per (rank name, lane name, event name): each span's duration less that of the
    spans nested in it on the same (pid, tid), as the report counts them
    (timeline_breakdown.h)."""
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    lane_names = {(e["pid"], e.get("tid", 0)): e["args"]["name"] for e in trace["traceEvents"]
                  if e.get("ph") == "M" and e.get("name") == "thread_name"}
    lanes = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            lanes.setdefault((e.get("pid", 0), e.get("tid", 0)), []).append(e)
    out = {}
    for (pid, tid), spans in lanes.items():
        lane = lane_names.get((pid, tid), f"thread {tid}")
        spans.sort(key=lambda e: (e["ts"], -(e["ts"] + e["dur"])))
        stack = []
        for e in spans:
            end = e["ts"] + e["dur"]
            while stack and stack[-1][1] <= e["ts"]:
                stack.pop()
            rank = names.get(pid, f"rank {pid}")
            out[(rank, lane, e["name"])] = out.get((rank, lane, e["name"]), 0) + e["dur"] * 1e-6
            if stack:
                parent, parent_end = stack[-1]
                key = (rank, lane, parent)
                out[key] -= (min(end, parent_end) - e["ts"]) * 1e-6
            stack.append((e["name"], end))
    return out


# --- the rendered page -------------------------------------------------------------------------

# Appended to a copy of the page: once every plot has settled, each chart's box in page pixels,
# so that the screenshot can be read where the plots are.
BOX_SCRIPT = """<script>
(function wait() {
  if (!document.body.dataset.plotsDone) return setTimeout(wait, 50);
  for (const el of document.querySelectorAll('.chart')) {
    const r = el.getBoundingClientRect();
    el.dataset.box = [r.left + scrollX, r.top + scrollY, r.width, r.height].map(Math.round).join(',');
  }
  document.body.dataset.boxes = 'true';
})();
</script>"""


def render(page, tmp):
    """Headless Chromium's screenshot (PNG path) and rendered DOM of `page`."""
    probe = f"{tmp}/probe.html"
    with open(page) as f:
        page_text = f.read()
    with open(probe, "w") as f:
        f.write(page_text.replace("</body>", BOX_SCRIPT + "</body>"))
    shot = f"{tmp}/shot.png"
    # The virtual time budget lets the page's timers and promises run to the end before the
    # dump; a device scale of 1 makes a page pixel one screenshot pixel.
    p = run(CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--force-device-scale-factor=1", "--window-size=1200,5000",
            "--virtual-time-budget=20000", f"--screenshot={shot}", "--dump-dom",
            f"file://{probe}")
    return shot, p.stdout


def charts(dom):
    """{title: (box, [mark labels as dicts])} of the rendered page's plots."""
    out = {}
    for m in re.finditer(r'<div class="chart[^"]*" id="chart-\d+" data-title="([^"]*)"([^>]*)>(.*?)</div>',
                         dom, re.S):
        title, attrs, body = html.unescape(m.group(1)), m.group(2), m.group(3)
        if 'data-rendered="true"' not in attrs:
            err = re.search(r'data-error="([^"]*)"', attrs)
            fail(f"plot {title!r} did not render: {err.group(1) if err else attrs}")
        box = tuple(int(v) for v in re.search(r'data-box="([^"]*)"', attrs).group(1).split(","))
        marks = []
        for tag in re.findall(r"<path [^>]*>", body):
            role = re.search(r'aria-roledescription="([^"]*)"', tag)
            label = re.search(r'aria-label="([^"]*)"', tag)
            if role and label and role.group(1) in ("point", "bar"):
                text = html.unescape(label.group(1))
                marks.append(dict(kv.split(": ", 1) for kv in text.split("; ")))
        out[title] = (box, marks)
    return out


def check_pixels(png, title, box, colours):
    """The plot's box holds ink, and each of `colours` (a run's line, a bar) is drawn in it."""
    x0, y0, bw, bh = box
    if x0 + bw > png.width or y0 + bh > png.height:
        fail(f"plot {title!r} at {box} lies outside the {png.width}x{png.height} screenshot")
    counts = dict((px, n) for n, px in png.crop((x0, y0, x0 + bw, y0 + bh)).getcolors(bw * bh))
    ink = bw * bh - counts.get((255, 255, 255), 0)
    seen = set(counts)
    # Axes, grid, labels and marks cover a few percent of a plot's box; a blank or failed plot
    # (one line of text) covers well under 1%.
    if ink < 0.02 * bw * bh:
        fail(f"plot {title!r} is nearly blank: {ink} of {bw * bh} pixels drawn")
    # Vega draws a mark's fill in the scheme's exact colour (points, bar interiors are several
    # pixels wide, so some pixels are not blended with the background).
    for c in colours:
        if c not in seen:
            fail(f"plot {title!r}: no pixel of colour {c} (a run's or part's mark is missing)")
    print(f"ok: plot {title!r} drawn: {ink} of {bw * bh} pixels, colours {sorted(colours)}")


TABLEAU = [(0x4c, 0x78, 0xa8), (0xf5, 0x85, 0x18)]  # Vega's first two category colours


def check_course(marks, title, want, x_title, x_key, y_key):
    """The plot's points are exactly `want`: {(run, x): y}, in the x_title panel."""
    got = {}
    for m in marks:
        if x_title in m:
            got[(m["run"], float(m[x_title]))] = float(m[y_key])
    keys = {(r, float(x)) for r, x in want}
    if set(got) != keys:
        fail(f"plot {title!r} ({x_title}) has points {sorted(got)}, metrics have {sorted(keys)}")
    for (r, x), y in want.items():
        if not close(got[(r, float(x))], y):
            fail(f"plot {title!r}: {r} at {x_key} {x}: shows {got[(r, float(x))]}, metrics {y}")
    print(f"ok: plot {title!r} against {x_title}: {len(want)} points equal the metrics")


def check_shown_x(marks, title, want_x, x_title):
    got = sorted((m["run"], float(m[x_title])) for m in marks if x_title in m)
    want = sorted(want_x)
    if len(got) != len(want) or any(a[0] != b[0] or not close(a[1], b[1]) for a, b in zip(got, want)):
        fail(f"plot {title!r}: {x_title} values {got}, metrics {want}")


def check_rank_times(png, plots, run_name, timeline):
    """The run's stacked bars per rank equal the self times of its timeline."""
    title = f"time per rank: {run_name}"
    box, marks = plots[title]
    with open(timeline) as f:
        trace = json.load(f)
    want = self_seconds(trace)
    got = {(m["rank"], m["lane"], m["name"]): float(m["seconds"]) for m in marks}
    # The report adds and subtracts the same float64 durations, maybe in another order: each of
    # the n operations rounds by at most 2^-53 of the running total, which is at most the sum of
    # all durations S. So |report - want| <= n * 2^-53 * S, then shown to 12 digits (SHOWN_REL).
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    slack = 2 * len(spans) * 2.0**-53 * sum(e["dur"] for e in spans) * 1e-6
    if set(got) != set(want) or any(abs(got[k] - v) > SHOWN_REL * abs(v) + slack
                                    for k, v in want.items()):
        fail(f"plot {title!r}: bars {got}, timeline gives {want}")
    # A bar per lane: no lane's stack holds more than its rank's time from the rank's first
    # span's start to its last span's end (one stack of all lanes would, where they overlap).
    # The bars are shown to SHOWN_REL each and summed with the same rounding as above, so a
    # stack of s may show s * (1 + SHOWN_REL) + slack.
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    for rank, lane in {(r, l) for r, l, _ in got}:
        stack = sum(v for (r, l, _), v in got.items() if (r, l) == (rank, lane))
        mine = [e for e in spans if names.get(e.get("pid", 0), f"rank {e.get('pid', 0)}") == rank]
        extent = (max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)) * 1e-6
        if stack > extent * (1 + SHOWN_REL) + slack:
            fail(f"plot {title!r}: {rank}, {lane}: {stack} s stacked, more than the {extent} s "
                 f"its rank's spans cover")
    print(f"ok: plot {title!r}: {len(want)} bars equal the timeline's self times, a bar per lane")
    check_pixels(png, title, box, [TABLEAU[0]])


def scenario_render(distml, tmp):
    config = write_config(tmp)
    timeline = has_flag(distml, "train", "--timeline")
    runs = {"allreduce": [], "local_sgd": ["--set", "strategy.name=local_sgd"]}
    for name, extra in runs.items():
        run(distml, "train", "--config", config, "--engine", "local", "--np", "2",
            "--run-dir", f"{tmp}/runs/{name}", *extra, *(["--timeline"] if timeline else []),
            "--profile", f"{tmp}/{name}.profile.json")
    # What distml simulate predicts for each run's strategy, from its profile.
    predicted = {}
    for name, extra in runs.items():
        out = run(distml, "simulate", "--profile", f"{tmp}/{name}.profile.json", "--config",
                  config, *extra, "--hosts", "1,2,4", "--ranks-per-host", "2", "--bandwidth",
                  "1gbit", "--json").stdout
        with open(f"{tmp}/{name}.predicted.jsonl", "w") as f:
            f.write(out)
        lines = [json.loads(line) for line in out.splitlines()]
        predicted[lines[-1]["label"]] = [e for e in lines if e["event"] == "prediction"]
    if not timeline:  # a hand-made one, until train writes its own
        with open(f"{tmp}/runs/allreduce/timeline.json", "w") as f:
            json.dump(FIXTURE_TRACE, f)
        # Differences of a few microsecond counts: float64 rounding, ~1e-18 s.
        mine = self_seconds(FIXTURE_TRACE)
        if set(mine) != set(FIXTURE_SECONDS) or any(abs(mine[k] - v) > 1e-15
                                                    for k, v in FIXTURE_SECONDS.items()):
            fail(f"the test's self times {mine} differ from the hand-made {FIXTURE_SECONDS}")
    page = f"{tmp}/report.html"
    run(distml, "report", f"{tmp}/runs/allreduce", f"{tmp}/runs/local_sgd", "--out", page,
        "--predictions", *[f"{tmp}/{name}.predicted.jsonl" for name in runs])
    with open(page) as f:
        page_text = f.read()
    if re.search(r"<script[^>]+src=|<link[^>]+href=|@import", page_text):
        fail("the page loads something from outside itself")

    shot, dom = render(page, tmp)
    if 'data-boxes="true"' not in dom:
        fail("the page's plots did not settle within the virtual time budget")
    plots = charts(dom)
    png = Image.open(shot).convert("RGB")
    metrics = {n: read_jsonl(f"{tmp}/runs/{n}/metrics.jsonl") for n in runs}
    done = {n: json.load(open(f"{tmp}/runs/{n}/done.json")) for n in runs}
    for n in runs:
        if metrics[n][-1] != done[n]:
            fail(f"{n}: metrics.jsonl's last line {metrics[n][-1]} is not done.json {done[n]}")
    expected = ["train loss", "test loss", "test accuracy", "samples/s during the run",
                "throughput (done line)",
                "communication time (s): hidden behind backward, and exposed",
                "bytes sent per step (rank 0's model payload)",
                "scaling: predicted step and efficiency against ranks"]
    with_timeline = [n for n in runs if os.path.exists(f"{tmp}/runs/{n}/timeline.json")]
    expected += [f"time per rank: {n}" for n in with_timeline]
    if sorted(plots) != sorted(expected):
        fail(f"the page has plots {sorted(plots)}, expected {sorted(expected)}")

    def course(event, key, with_done):
        want_step, want_time = {}, []
        for n in runs:
            for e in metrics[n]:
                if e["event"] == event:
                    want_step[(n, e["step"])] = e[key]
                    want_time.append((n, e["elapsed_s"]))
            if with_done:
                want_step[(n, done[n]["global_step"])] = done[n][key]
                want_time.append((n, done[n]["wall_s"]))
        return want_step, want_time

    for title, event, key, with_done in [("train loss", "step", "loss", False),
                                         ("test loss", "eval", "test_loss", True),
                                         ("test accuracy", "eval", "test_accuracy", True),
                                         ("samples/s during the run", "step", "samples_per_sec",
                                          False)]:
        box, marks = plots[title]
        want_step, want_time = course(event, key, with_done)
        check_course(marks, title, want_step, "step", "step", key)
        check_shown_x(marks, title, want_time, "seconds since the start")
        check_pixels(png, title, box, TABLEAU)

    title = "communication time (s): hidden behind backward, and exposed"
    box, marks = plots[title]
    for n in runs:
        comm, share = done[n]["comm_time_s"], done[n]["overlap_fraction"]
        for part, want in [("hidden (overlapped)", comm * share), ("exposed", comm * (1 - share))]:
            got = [float(m["seconds"]) for m in marks if m["run"] == n and m["part"] == part]
            if len(got) != 1 or not close(got[0], want):
                fail(f"plot {title!r}: {n} {part}: shows {got}, done line gives {want}")
    check_pixels(png, title, box, TABLEAU)
    title = "bytes sent per step (rank 0's model payload)"
    box, marks = plots[title]
    for n in runs:
        got = [float(m["bytes_per_step"]) for m in marks if m["run"] == n]
        want = done[n]["bytes_sent"] / done[n]["steps"]
        if len(got) != 1 or not close(got[0], want):
            fail(f"plot {title!r}: {n}: shows {got}, done line gives {want}")
    check_pixels(png, title, box, TABLEAU)
    box, marks = plots["throughput (done line)"]
    for n in runs:
        for key in ("steps_per_sec", "samples_per_sec"):
            got = [float(m[key]) for m in marks if m["run"] == n and key in m]
            if len(got) != 1 or not close(got[0], done[n][key]):
                fail(f"throughput plot: {n} {key}: shows {got}, done line gives {done[n][key]}")
    check_pixels(png, "throughput (done line)", box, TABLEAU)

    # Scaling: each prediction file's line (step and efficiency per cluster size) and each
    # run's measured step at its ranks. The two lines' colours are drawn; the runs' points, at
    # the same ranks and near the same step, may cover each other, so they are read back as
    # marks only.
    title = "scaling: predicted step and efficiency against ranks"
    box, marks = plots[title]
    who = "strategy or run"
    want = [(label, e["ranks"], "step (s)", e["step_s"]) for label, lines in predicted.items()
            for e in lines]
    want += [(label, e["ranks"], "efficiency", e["efficiency"])
             for label, lines in predicted.items() for e in lines]
    want += [(n, done[n]["np"], "step (s)", 1 / done[n]["steps_per_sec"]) for n in runs]
    got = sorted((m[who], float(m["ranks"]), y, float(m[y])) for m in marks for y in
                 ("step (s)", "efficiency") if y in m)
    want = sorted((w, float(r), y, v) for w, r, y, v in want)
    if len(got) != len(want) or any(a[:3] != b[:3] or not close(a[3], b[3])
                                    for a, b in zip(got, want)):
        fail(f"plot {title!r} shows {got}, the predictions and done lines give {want}")
    print(f"ok: plot {title!r}: {len(want)} points equal the predictions and the runs")
    check_pixels(png, title, box, TABLEAU)

    for n in with_timeline:
        check_rank_times(png, plots, n, f"{tmp}/runs/{n}/timeline.json")
    # A span name has one colour in every run's plot: each scale's domain is every run's names.
    names = set()
    for n in with_timeline:
        with open(f"{tmp}/runs/{n}/timeline.json") as f:
            names |= {e["name"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
    specs = specs_of(page)
    for n in with_timeline:
        domain = specs[f"time per rank: {n}"]["encoding"]["color"]["scale"]["domain"]
        if domain != sorted(names):
            fail(f"time per rank: {n}: colour domain {domain}, want every run's {sorted(names)}")


    # The comparison table: exact values in data-value, shown to 6 digits.
    for n in runs:
        losses = [e["loss"] for e in metrics[n] if e["event"] == "step"]
        for key, want in [("test_loss", done[n]["test_loss"]), ("steps", done[n]["steps"]),
                          ("final_train_loss", losses[-1]),
                          ("steps_per_sec", done[n]["steps_per_sec"])]:
            cell = re.search(rf'<td class="num" data-run="{n}" data-key="{key}" '
                             rf'data-value="([^"]*)">([^<]*)</td>', dom)
            if not cell:
                fail(f"the table has no {key} cell for {n}")
            shown = str(want) if isinstance(want, int) else "%.6g" % want
            if float(cell.group(1)) != want or cell.group(2) != shown:
                fail(f"table {n} {key}: data-value {cell.group(1)} shown {cell.group(2)}, "
                     f"want {want!r} shown {shown}")
    print("ok: the table's test loss, steps, final train loss and steps/s equal the metrics")
    # The settings on which the runs differ lead the table: here the strategy, and only it of
    # the keys the two configs share with the same value.
    settings = re.findall(r'<tr class="setting"><th>([^<]*)</th>(.*?)</tr>', dom)
    strategy = dict(settings).get("strategy.name", "")
    if "allreduce" not in strategy or "local_sgd" not in strategy or "data.path" in dict(settings):
        fail(f"the table's differing settings: {settings}")
    print(f"ok: the table leads with the {len(settings)} settings that differ: "
          f"{[k for k, _ in settings]}")


# --- what the commands write -------------------------------------------------------------------

def specs_of(page):
    """{title: Vega-Lite spec} embedded in a report page."""
    with open(page) as f:
        page_text = f.read()
    text = re.search(r'<script type="application/json" id="chart-specs">(.*?)</script>', page_text,
                     re.S).group(1)
    return {c["spec"]["title"]: c["spec"] for c in json.loads(text)}


def scenario_run_dirs(distml, tmp):
    config = write_config(tmp, steps=4)
    common = ["train", "--config", config, "--engine", "local", "--np", "2"]
    r = f"{tmp}/train"
    out = run(distml, *common, "--run-dir", r, "--json").stdout.splitlines()
    lines = read_jsonl(f"{r}/metrics.jsonl")
    if lines != [json.loads(line) for line in out]:
        fail(f"metrics.jsonl differs from what --json printed:\n{lines}\n{out}")
    if json.load(open(f"{r}/done.json")) != lines[-1] or lines[-1]["event"] != "done":
        fail("done.json is not the last line of metrics.jsonl")
    # config.toml is the config as resolved: distml reads it back to the same keys.
    run(distml, "train", "--config", f"{r}/config.toml", "--print-config")
    print("ok: train wrote config.toml, metrics.jsonl (as --json prints) and done.json")
    expect_error("holds a finished run (done.json)", distml, *common, "--run-dir", r)
    os.remove(f"{r}/done.json")
    expect_error("holds a run that stopped before its done line", distml, *common, "--run-dir", r)

    # A resumed run appends to its folder.
    ck = f"{tmp}/ck"
    run(distml, *common, "--run-dir", f"{tmp}/resumed", "--set", f"train.checkpoint_dir={ck}")
    run(distml, *common, "--run-dir", f"{tmp}/resumed", "--set", "train.max_steps=8",
        "--resume", ck)
    steps = [e["step"] for e in read_jsonl(f"{tmp}/resumed/metrics.jsonl") if e["event"] == "step"]
    if steps != [2, 4, 6, 8]:
        fail(f"the resumed run's folder has steps {steps}, expected 2 4 6 8")
    print("ok: --resume appends to its run directory")

    # A run that died after its checkpoint at step 4 and restarted from it repeats step 6, on a
    # clock that starts again: the report keeps the second attempt's 6 and continues its clock.
    fake = f"{tmp}/restarted"
    os.makedirs(fake)
    with open(f"{fake}/metrics.jsonl", "w") as f:
        for step, t in [(2, 1.0), (4, 2.0), (6, 3.0), (6, 0.5), (8, 1.5)]:
            f.write(json.dumps({"event": "step", "step": step, "loss": step / 10.0,
                                "elapsed_s": t}) + "\n")
    run(distml, "report", fake, "--out", f"{tmp}/restarted.html")
    rows = specs_of(f"{tmp}/restarted.html")["train loss"]["data"]["values"]
    got = [(v["step"], v["loss"], v["time_s"]) for v in rows]
    # The times are sums of two binary fractions that are exact (3.0 + 0.5, 3.0 + 1.5).
    if got != [(2, 0.2, 1.0), (4, 0.4, 2.0), (6, 0.6, 3.5), (8, 0.8, 4.5)]:
        fail(f"the restarted run's points are {got}")
    print("ok: a restarted run's repeated step is replaced and its clock continues")

    # rl: the evaluation returns of the events and the done line, at their environment steps.
    rl_dir = f"{tmp}/rl"
    run(distml, "rl", "ppo", "--env", "cartpole", "--engine", "local", "--np", "2",
        "--set", "run.env_steps=2000", "--set", "run.eval_episodes=2", "--set", "run.eval_every=2",
        "--set", "run.eval_episodes_during=1", "--run-dir", rl_dir)
    lines = read_jsonl(f"{rl_dir}/metrics.jsonl")
    done = json.load(open(f"{rl_dir}/done.json"))
    want = [(e["env_steps"], e["eval_mean_return"]) for e in lines if e["event"] == "eval"]
    want.append((done["env_steps"], done["eval_mean_return"]))
    run(distml, "report", rl_dir, "--out", f"{tmp}/rl.html")
    rows = specs_of(f"{tmp}/rl.html")["evaluation return"]["data"]["values"]
    if [(v["env_steps"], v["eval_mean_return"]) for v in rows] != want or len(want) < 2:
        fail(f"the rl report's evaluation returns {rows} are not the metrics' {want}")
    if "run.env_steps = 2000" not in open(f"{rl_dir}/config.toml").read():
        fail("rl's config.toml lacks run.env_steps = 2000")
    print(f"ok: rl wrote its run directory; the report's returns equal its {len(want)} evaluations")

    # fit: the done line and the options as resolved.
    csv = f"{tmp}/points.csv"
    with open(csv, "w") as f:
        f.write("x,y,kind\n" + "".join(f"{i % 7},{i % 5},{'ab'[i % 2]}\n" for i in range(40)))
    fit_dir = f"{tmp}/fit"
    out = run(distml, "fit", "logreg", "--data", csv, "--label", "kind", "--engine", "local",
              "--np", "2", "--set", "C=0.5", "--json", "--run-dir", fit_dir).stdout
    if json.load(open(f"{fit_dir}/done.json")) != json.loads(out.splitlines()[-1]):
        fail("fit's done.json is not its done line")
    import tomllib
    with open(f"{fit_dir}/config.toml", "rb") as f:
        options = tomllib.load(f)
    if options["fit"]["estimator"] != "logreg" or options["estimator"]["C"] != "0.5" or \
            options["fit"]["np"] != 2:
        fail(f"fit's config.toml: {options}")
    run(distml, "report", fit_dir, "--out", f"{tmp}/fit.html")
    print("ok: fit wrote config.toml and done.json; a report of it has its table")

    # Every attempt's trace counts (comm/timeline_exchange.h): a restart's own file, and the
    # ranks' streams of an attempt killed before it wrote one (each stream's last line cut
    # short by the kill). Here both hold the fixture: each bar is twice its self time.
    a = f"{tmp}/attempts"
    run(distml, *common, "--run-dir", a)
    with open(f"{a}/timeline.attempt1.json", "w") as f:
        json.dump(FIXTURE_TRACE, f)
    for rank in (0, 1):
        with open(f"{a}/timeline.json.attempt0.rank{rank}.jsonl", "w") as f:
            for e in FIXTURE_TRACE["traceEvents"]:
                if e["pid"] == rank:
                    f.write(json.dumps(e) + "\n")
            f.write('{"ph": "X", "name": "st')
    run(distml, "report", a, "--out", f"{tmp}/attempts.html")
    rows = specs_of(f"{tmp}/attempts.html")["time per rank: attempts"]["data"]["values"]
    got = {(r["rank"], r["lane"], r["name"]): r["seconds"] for r in rows}
    want = {k: 2 * v for k, v in FIXTURE_SECONDS.items()}
    # Sums of a few float64 durations of about 1e-3 s: rounding stays below 1e-17 s.
    if set(got) != set(want) or any(abs(got[k] - v) > 1e-12 for k, v in want.items()):
        fail(f"time per rank over two attempts: {got}, want {want}")
    print("ok: the report adds a restart's trace and a killed attempt's streams")


def scenario_bad_input(distml, tmp):
    report = [distml, "report"]
    expect_error(f"{tmp}/nothing: no such folder", *report, f"{tmp}/nothing")
    os.makedirs(f"{tmp}/empty")
    expect_error(f"{tmp}/empty: not a run directory: metrics.jsonl is missing", *report,
                 f"{tmp}/empty")
    os.makedirs(f"{tmp}/blank")
    open(f"{tmp}/blank/metrics.jsonl", "w").close()
    expect_error(f"{tmp}/blank/metrics.jsonl: no events", *report, f"{tmp}/blank")
    os.makedirs(f"{tmp}/broken")
    with open(f"{tmp}/broken/metrics.jsonl", "w") as f:
        f.write('{"event": "step", "step": 1, "loss": 1.0}\n{"event": "step", "step": 2, \n'
                '{"event": "step", "step": 3, "loss": 0.5}\n')
    expect_error(f"{tmp}/broken/metrics.jsonl:2: not valid JSON", *report, f"{tmp}/broken")
    with open(f"{tmp}/broken/metrics.jsonl", "w") as f:
        f.write('{"event": "step", "step": 1}\n[1, 2]\n')
    expect_error(f"{tmp}/broken/metrics.jsonl:2: expected a JSON object with an \"event\" name",
                 *report, f"{tmp}/broken")
    # A last line cut short by a crash (no newline) is left out, with a warning.
    with open(f"{tmp}/broken/metrics.jsonl", "w") as f:
        f.write('{"event": "step", "step": 1, "loss": 1.0, "elapsed_s": 0.1}\n{"event": "st')
    p = run(*report, f"{tmp}/broken", "--out", f"{tmp}/cut.html")
    if "metrics.jsonl:2: left out" not in p.stderr:
        fail(f"no warning for the cut last line: {p.stderr}")
    print("ok: a last line cut short is left out with a warning")
    with open(f"{tmp}/broken/done.json", "w") as f:
        f.write('{"event": "done", "steps": ')
    expect_error(f"{tmp}/broken/done.json: not valid JSON", *report, f"{tmp}/broken")
    with open(f"{tmp}/broken/done.json", "w") as f:
        f.write('{"event": "done"}')
    with open(f"{tmp}/broken/timeline.json", "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "name": "step", "pid": 0}]}')
    expect_error(f"{tmp}/broken/timeline.json: traceEvents[0] (\"ph\": \"X\") needs a number \"ts\"",
                 *report, f"{tmp}/broken")
    os.remove(f"{tmp}/broken/timeline.json")
    expect_error("give run directories, --predictions files, or both", *report)
    with open(f"{tmp}/predicted.jsonl", "w") as f:
        f.write('{"event": "prediction", "ranks": 2, "step_s": 0.1}\n')
    expect_error(f"{tmp}/predicted.jsonl:1: a prediction without a number \"efficiency\"",
                 *report, "--predictions", f"{tmp}/predicted.jsonl")
    env = dict(os.environ, DISTML_VEGA_DIR=f"{tmp}/no-vega")
    expect_error("the plotting library is missing", *report, f"{tmp}/broken", env=env)


def main():
    distml, scenario = sys.argv[1], sys.argv[2]
    if scenario == "render" and not CHROMIUM:
        fail("chromium is not installed (scripts/setup.sh installs it)")
    tmp = tempfile.mkdtemp()
    try:
        {"render": scenario_render, "run-dirs": scenario_run_dirs,
         "bad-input": scenario_bad_input}[scenario](distml, tmp)
    finally:
        if not os.environ.get("DISTML_KEEP_TMP"): shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: {scenario}")


if __name__ == "__main__":
    main()
