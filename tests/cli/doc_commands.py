"""Every distml command that README.md and docs/*.md show, checked against the binary, so that
the docs cannot drift from it. Usage: doc_commands.py DISTML REPO [--all]

- Every command: its subcommand exists, and each flag it shows is one that `distml SUB --help`
  lists (for `launch ... -- distml SUB ...`, both commands'). Synopses with [optional] parts
  and placeholders are checked this way only.
- A command that runs as shown (no [optional] part, no placeholder, every file it reads in a
  fresh clone) runs with exit 0, shortened where it trains (train: 2 steps; rl: 1,000
  environment steps; bench: two small sizes, one repetition), from a folder of its own per doc
  (a doc's commands may go on from one another: a checkpoint, then its resume) holding the
  repository's examples, with MNIST and Fashion-MNIST stood in for by small files of their
  format (make_idx.py: 1,024 samples, a step for 8 ranks of 128), since a fresh clone has no
  data sets. Without --all (make test, which has 25 minutes for everything on 2 cores), a
  command that starts more than 2 ranks is checked with --print-config instead (its config
  and every --set read and checked as a run would, before any rank starts); with --all (make
  bench) it runs too.
Prints what ran and what was only checked, and why; exits 1 on any drift."""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_.]*$|^CMD|\.\.\.|^[^=]*\|")  # FILE, CMD..., mpi|gloo
# What a command writes: a missing file there is no reason not to run it.
OUTPUT_FLAGS = {"--out", "--model-out", "--timeline", "--run-dir", "--xgboost-out"}
OUTPUT_FLAGS_OF = {"train": {"--profile"}}  # those that other subcommands read
OUTPUT_KEYS = ("train.checkpoint_dir", "run.checkpoint_dir", "train.export")
DATA_SETS = {"mnist", "fashion-mnist"}  # stood in for; the others are not in a fresh clone


def doc_commands(repo):
    """(file, command text) of each distml command line in a fenced block, continuation lines
    joined; not the lines of distml's own output shown beside them ("distml launch: ...")."""
    out = []
    for path in ["README.md", *sorted(glob.glob(os.path.join(repo, "docs", "*.md")))]:
        lines = open(os.path.join(repo, path)).read().split("\n")
        fenced, i = False, 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("```"):
                fenced = not fenced
            elif fenced and re.match(r"(build/)?distml \w", line) and \
                    not re.match(r"(build/)?distml \w+:", line):
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1] + " " + lines[i].strip()
                out.append((os.path.relpath(os.path.join(repo, path), repo), line))
            i += 1
    return out


def words(command):
    return shlex.split(command, comments=True)


HELP = {}


def help_of(distml, sub):
    if sub not in HELP:
        r = subprocess.run([distml, sub, "--help"], capture_output=True, text=True)
        HELP[sub] = r.stdout if r.returncode == 0 else None
    return HELP[sub]


def drift(distml, argv):
    """What of `argv` (after distml) the binary does not know: a subcommand, a flag."""
    if not argv:
        return ["no subcommand"]
    sub, rest = argv[0], argv[1:]
    inner = []
    if sub == "launch" and "--" in rest:
        rest, inner = rest[:rest.index("--")], rest[rest.index("--") + 1:]
    text = help_of(distml, sub)
    if text is None:
        return [f"no subcommand '{sub}'"]
    problems = []
    for w in rest:
        flag = w.strip("[]").split("=")[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-z]", flag) and \
                not re.search(rf"(^|[\s,]){re.escape(flag)}\b", text, re.M):
            problems.append(f"'{sub}' has no flag {flag}")
    if inner and os.path.basename(inner[0]) == "distml":
        problems += drift(distml, inner[1:])
    return problems


def why_not_run(argv, repo, work):
    """Why a command cannot run as shown; None where it can. A file it reads may be in the
    repository or written by an earlier command of the same doc (in `work`)."""
    for w in argv:
        if "[" in w or "]" in w or PLACEHOLDER.search(w):
            return f"a synopsis ('{w}')"
    if argv[0] == "launch" and ("--netns-cluster" in argv or "--hosts" in argv or
                                "--hostfile" in argv):
        return "needs other hosts (or root for emulated ones)"
    for i, w in enumerate(argv):
        value = w.split("=", 1)[1] if "=" in w else w
        previous = argv[i - 1] if i else ""
        if previous in OUTPUT_FLAGS | OUTPUT_FLAGS_OF.get(argv[0], set()) or \
                w.startswith(OUTPUT_KEYS) or previous == "--resume":
            continue
        file = value.split(":")[-1].split(" ")[-1]
        if re.search(r"\.(toml|csv|json|pt|npz|sh|py)$|/", value) and not value.startswith("-") \
                and not any(os.path.exists(os.path.join(d, file)) for d in (repo, work)):
            return f"reads {value}, which the doc's reader makes"
    config = argv[argv.index("--config") + 1] if "--config" in argv else None
    if config:
        text = open(os.path.join(repo, config)).read()
        dataset = re.search(r'^dataset\s*=\s*"([^"]+)"', text, re.M)
        if dataset and dataset.group(1) not in DATA_SETS:
            path = re.search(r'^path\s*=\s*"([^"]+)"', text, re.M)
            return (f"its data ({dataset.group(1)} at {path.group(1) if path else '?'}) is not in "
                    f"a fresh clone")
    return None


def ranks(argv):
    """How many processes the command starts."""
    np = int(argv[argv.index("--np") + 1]) if "--np" in argv else 1
    engine = argv[argv.index("--engine") + 1] if "--engine" in argv else "mpi"
    return 1 if engine == "local" else np


def shortened(argv):
    if argv[0] == "train":
        return argv + ["--set", "train.max_steps=2"]
    if argv[0] == "rl":
        return argv + ["--set", "run.env_steps=1000"]
    if argv[0] == "plan":
        return argv + ["--set", "train.max_steps=3"]
    if argv[0] == "bench":
        out = list(argv)
        for flag, value in (("--sizes", "4,1K"), ("--reps", "1")):
            if flag in out:
                out[out.index(flag) + 1] = value
            else:
                out += [flag, value]
        return out
    return argv


def main():
    distml, repo = sys.argv[1], os.path.abspath(sys.argv[2])
    run_all = "--all" in sys.argv[3:]
    commands = doc_commands(repo)
    failed, ran, checked = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        for name in DATA_SETS:
            subprocess.run([sys.executable, os.path.join(HERE, "make_idx.py"),
                            os.path.join(data, name), "--samples", "1024"], check=True,
                           capture_output=True)
        for path, command in commands:
            work = os.path.join(tmp, path.replace("/", "_"))
            if not os.path.isdir(work):
                os.makedirs(work)
                os.symlink(os.path.join(repo, "examples"), os.path.join(work, "examples"))
                os.symlink(data, os.path.join(work, "data"))
            argv = words(command)[1:]
            # "> FILE": the command's output kept in the doc's work folder, as a shell would.
            into = None
            if ">" in argv:
                at = argv.index(">")
                argv, into = argv[:at], argv[at + 1]
            problems = drift(distml, argv)
            if problems:
                failed.append(f"{path}: {command}\n    " + "; ".join(problems))
                continue
            reason = why_not_run(argv, repo, work)
            if reason:
                checked += 1
                print(f"checked ({reason}): {path}: {command}")
                continue
            run = [distml, *shortened(argv)]
            static = not run_all and ranks(argv) > 2 and argv[0] in ("train", "rl")
            if static:
                run = [distml, *argv, "--print-config"]
            elif not run_all and ranks(argv) > 2:
                checked += 1
                print(f"checked (starts {ranks(argv)} ranks; make bench runs it): {path}: {command}")
                continue
            started = time.time()
            try:
                r = subprocess.run(run, cwd=work, capture_output=True, text=True, timeout=180)
                code, tail = r.returncode, (r.stdout + r.stderr)[-1500:]
            except subprocess.TimeoutExpired:
                code, tail = "timeout", ""
            if code != 0:
                failed.append(f"{path}: {command}\n    exit {code}: {shlex.join(run)}\n{tail}")
            else:
                if into:
                    with open(os.path.join(work, into), "w") as f:
                        f.write(r.stdout)
                if static:
                    checked += 1
                    print(f"checked (--print-config; it starts {ranks(argv)} ranks, make bench "
                          f"runs it): {path}: {command}")
                else:
                    ran += 1
                    print(f"ran ({time.time() - started:.1f} s): {path}: {command}")
    print(f"{len(commands)} commands in the docs: {ran} ran, {checked} checked without running "
          f"(--help, --print-config), {len(failed)} drifted")
    if failed:
        print("FAIL:\n" + "\n".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
