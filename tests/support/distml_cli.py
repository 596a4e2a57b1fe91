"""What the Python CLI tests share: run `distml train` and read its done line."""
import json
import subprocess
import sys


def run(distml, *args, expect_rc=0, env=None):
    """`distml train ARGS` (in `env`, when given); exits the test with its output unless it
    returns `expect_rc`."""
    p = subprocess.run([distml, "train", *args], capture_output=True, text=True, timeout=300,
                       env=env)
    if p.returncode != expect_rc:
        sys.exit(f"FAIL: distml train {' '.join(args)} exited {p.returncode}, expected "
                 f"{expect_rc}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def done_line(p):
    """The last line of a --json run: its summary."""
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_resume(distml, common, checkpoint_dir):
    """8 steps straight against 4 steps, a checkpoint, and a resume for 4 more: the same
    parameters bit for bit. `common` holds the arguments both runs share. Returns the resumed
    run's done line."""
    straight = done_line(run(distml, *common, "--set", "train.max_steps=8"))
    run(distml, *common, "--set", "train.max_steps=4", "--set",
        f"train.checkpoint_dir={checkpoint_dir}")
    resumed = done_line(run(distml, *common, "--set", "train.max_steps=8", "--resume",
                            checkpoint_dir))
    if resumed["param_checksum"] != straight["param_checksum"] or resumed["global_step"] != 8:
        sys.exit(f"FAIL: resumed {resumed} differs from straight {straight}")
    return resumed
