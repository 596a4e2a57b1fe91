"""Restarts and checkpoint fallback, as a user meets them. Usage: restart_cli.py DISTML SCENARIO:
  kill ENGINE  2 ranks with --max-restarts 2; rank 1 is killed (SIGKILL) after the first
               checkpoint. The job must end with exit 0 after one restart, take the same
               number of steps as an uninterrupted run, and, since a resume is exact, end with
               the same parameters bit for bit (which is stronger than an accuracy within noise)
  corrupt      the newest of the kept checkpoints is damaged: the resume warns, naming it, and
               continues from the one before, again ending where a straight run ends; with
               all damaged, exit 2, which --max-restarts does not restart
  shrink STRAT 3 gloo ranks with --min-np 2 train for two epochs with strategy STRAT; rank 2
               is killed after the first checkpoint. The job must finish on 2 ranks with exit 0, and take exactly
               the steps that finish the interrupted epoch from the first sample the 3 ranks
               had not taken, then a whole epoch of 2 (which sample each step reads is
               checked in the sampler's tests: none skipped or repeated)
  launched     the same with `distml launch -n 3 --min-np 2 --max-restarts 2 -- distml train`:
               the ranks take the policy from the launcher; and `distml launch --max-restarts`
               without a checkpoint folder: the ranks refuse it (exit 2), not restarted
  owned        run A keeps steps 80 and 120 in a folder; a fresh run B there is refused (exit
               2, naming run A and --resume) and changes no file; B resuming the folder
               continues run A from step 120 (not from a third run's file put there under a
               higher step), keeps the run's newest 2 and the third run's file; a temporary
               file of a dead writer on this host is removed, one of another host kept
  orphans ENGINE  the launcher of a 2-rank run is SIGKILLed while training: 5 s later no rank
               of it runs
  preempt ENGINE SIG  SIG (TERM or USR1) to `train --np 2` while training: exit 75, a checkpoint
               at the step where the ranks stopped, and --resume from it ends where a straight
               run ends, bit for bit
  timeline     2 gloo ranks with --run-dir --timeline and --max-restarts 1; rank 1 is killed
               after the first checkpoint: both ranks' streams of the killed attempt hold its
               steps, the restart writes its own trace file, and distml report reads them
  rl           distml rl ppo at 2 gloo ranks with --max-restarts 1; rank 1 is killed after the
               first checkpoint: exit 0 after one restart, as many env steps as a straight run;
               then SIGTERM to a run: exit 75 with a checkpoint, and its resume takes as many env
               steps as a straight run
  refused      --max-restarts without a checkpoint directory, with checkpoints only at the end
               (train.checkpoint_every = 0) or on the local engine, and
               --min-np for a strategy that cannot shrink: exit 2
  never-joins  rank 0 of a 2-rank gloo world starts alone: it must end (exit non-zero, naming
               rank 1) within train.timeout_s + 10 s
  stall ENGINE [late|rl]  2 ranks; rank 1 is stopped (SIGSTOP) while training. Rank 0's stall
               inspector must name rank 1 within train.stall_warn_s + 5 s, and the job must end
               (exit non-zero, naming rank 1) within train.timeout_s + 10 s of the stop. With
               "late", train.timeout_s (8) is shorter than train.stall_warn_s (60): the
               timeout's error must still name rank 1. With "rl", the same for distml rl ppo
               (stall_warn_s 3, timeout_s 8)"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from distml_cli import done_line, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, EVERY = 400, 40


def make_data(path):
    """Four Gaussian blobs in 32 dimensions: a model to train for a few hundred steps."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 4000)
    x = rng.normal(size=(4000, 32)).astype(np.float32) + 1.5 * np.eye(4, 32, dtype=np.float32)[y]
    np.savez(path, x=x, y=y.astype(np.int64))


def write_config(d):
    make_data(f"{d}/blobs.npz")
    with open(f"{d}/run.toml", "w") as f:
        f.write(f"""[data]
dataset = "npz"
path = "{d}/blobs.npz"
[model]
name = "mlp"
layers = [32, 256, 256, 4]
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
[train]
batch_size = 32
max_steps = {STEPS}
log_every = 100
""")
    return f"{d}/run.toml"


def descendants(pid):
    """Every process below `pid`."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def rank_process(root, rank):
    """The training process of `rank` below `root` (gloo's RANK or Open MPI's rank variable)."""
    wanted = {f"RANK={rank}".encode(), f"OMPI_COMM_WORLD_RANK={rank}".encode()}
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if env & wanted and b"distml" in cmd and b"mpirun" not in cmd:
            return pid
    return None


def written_checkpoints(folder):
    """The whole checkpoint files of `folder` (train's and rl's; not the run's id, not a
    temporary file)."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(n for n in names if re.fullmatch(r"checkpoint-\d{12}\.dml|rl_checkpoint\.bin", n))


def kill_after_first_checkpoint(distml, args, ckpt, rank, ready=lambda: True):
    """Runs `distml ARGS`, SIGKILLs `rank` once a checkpoint is written (and `ready()`), and
    returns the job's done line and stderr after it ended with exit 0."""
    job = subprocess.Popen([distml, *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (written_checkpoints(ckpt) and ready()):
        time.sleep(0.005)
    victim = rank_process(job.pid, rank)
    if victim is None:
        job.kill()
        sys.exit(f"FAIL: no checkpoint appeared, or rank {rank} was not found, within 120 s")
    os.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    out, err = job.communicate(timeout=300)
    if job.returncode != 0:
        sys.exit(f"FAIL: the restarted job exited {job.returncode}\n{out[-2000:]}\n{err[-3000:]}")
    print(f"killed rank {rank} (pid {victim}); the job finished {time.time() - killed_at:.1f} s "
          "later; launcher said:",
          *[l for l in err.splitlines() if "restart" in l], sep="\n  ")
    return done_line(subprocess.CompletedProcess([], 0, out, err)), err


def kill(distml, d, cfg, engine):
    common = ["--config", cfg, "--engine", engine, "--np", "2", "--json"]
    straight = done_line(run(distml, *common))
    ckpt = f"{d}/ckpt"
    done, err = kill_after_first_checkpoint(
        distml, ["train", *common, "--max-restarts", "2", "--set", f"train.checkpoint_dir={ckpt}",
                 "--set", f"train.checkpoint_every={EVERY}"], ckpt, 1)
    if done["restarts"] != 1 or done["global_step"] != STEPS:
        sys.exit(f"FAIL: expected 1 restart and {STEPS} steps, got {done}")
    if "rank 1" not in err or "signal 9" not in err or "resuming from" not in err:
        sys.exit(f"FAIL: the restart's cause (rank 1, signal 9) or resume point not logged:\n{err}")
    if done["param_checksum"] != straight["param_checksum"]:
        sys.exit(f"FAIL: the restarted run ends elsewhere than the straight one:\n{done}\n{straight}")
    print(f"ok: {done['global_step']} steps after a restart, the straight run's parameters "
          f"({done['param_checksum']}), test accuracy {done['test_accuracy']:.4f} vs "
          f"{straight['test_accuracy']:.4f}")


def corrupt(distml, d, cfg):
    ckpt = f"{d}/ckpt"
    common = ["--config", cfg, "--engine", "gloo", "--np", "2", "--json", "--set",
              "train.max_steps=120", "--set", f"train.checkpoint_dir={ckpt}", "--set",
              "train.checkpoint_every=40"]
    straight = done_line(run(distml, *common))
    kept = written_checkpoints(ckpt)
    if kept != ["checkpoint-000000000080.dml", "checkpoint-000000000120.dml"]:
        sys.exit(f"FAIL: train.keep_checkpoints = 2 should keep steps 80 and 120, kept {kept}")
    newest = f"{ckpt}/{kept[-1]}"
    with open(newest, "r+b") as f:  # one byte of the payload: the checksum must catch it
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    p = run(distml, *common, "--resume", ckpt)
    resumed = done_line(p)
    if f"skipping checkpoint {newest}" not in p.stderr or "checksum" not in p.stderr:
        sys.exit(f"FAIL: no warning naming the damaged {newest}:\n{p.stderr}")
    if resumed["steps"] != 40 or resumed["param_checksum"] != straight["param_checksum"]:
        sys.exit(f"FAIL: expected 40 steps from step 80 to the straight run's end:\n{resumed}\n"
                 f"{straight}")
    # Every checkpoint damaged: a CheckpointError naming each one, exit 2.
    for name in written_checkpoints(ckpt):
        with open(f"{ckpt}/{name}", "r+b") as f:
            f.truncate(50)
    p = run(distml, *common, "--resume", ckpt, expect_rc=2)
    if "no checkpoint is whole" not in p.stderr:
        sys.exit(f"FAIL: expected 'no checkpoint is whole':\n{p.stderr}")
    # Under --max-restarts the same: exit 2 is the same at every start, so it is not restarted.
    p = run(distml, *common, "--resume", ckpt, "--max-restarts", "2", expect_rc=2)
    if "not restarted" not in p.stderr or "restart 1 of" in p.stderr:
        sys.exit(f"FAIL: exit 2 under --max-restarts was restarted, or not said:\n{p.stderr}")
    print("ok: a damaged newest checkpoint is skipped with a warning; the one before resumes")


def write_csv(path, x, y):
    with open(path, "w") as f:
        f.write(",".join([f"x{i}" for i in range(x.shape[1])] + ["y"]) + "\n")
        for row, label in zip(x, y):
            f.write(",".join(f"{v:.6g}" for v in row) + f",{label}\n")


def epochs_of_csv(d, cfg, epochs):
    """`distml train` arguments for `epochs` epochs over the blobs as CSV (held whole by each
    rank: an npz file is read in part by each, which cannot change the world), with a
    checkpoint every 10 steps in {d}/ckpt."""
    with np.load(f"{d}/blobs.npz") as blobs:
        write_csv(f"{d}/train.csv", blobs["x"], blobs["y"])
        write_csv(f"{d}/test.csv", blobs["x"][:500], blobs["y"][:500])
    return ["train", "--config", cfg, "--set", "data.dataset=csv", "--set", f"data.path={d}/train.csv",
            "--set", f"data.test_path={d}/test.csv", "--set", "data.label=y", "--json",
            "--set", "train.max_steps=0", "--set", f"train.epochs={epochs}", "--set",
            f"train.checkpoint_dir={d}/ckpt", "--set", "train.checkpoint_every=10"]


def shrink(distml, d, cfg, strategy, launched=False):
    ckpt, batch, samples = f"{d}/ckpt", 32, 4000
    train = [*epochs_of_csv(d, cfg, 2), "--set", f"strategy.name={strategy}"]
    policy = ["--engine", "gloo", "--min-np", "2"]
    args = (["launch", "-n", "3", *policy, "--max-restarts", "2", "--", distml, *train] if launched
            else [*train, *policy, "--np", "3"])
    done, err = kill_after_first_checkpoint(distml, args, ckpt, 2)
    resumed = re.search(r"resuming from \S+ at step (\d+) on 2 ranks \(it was written by 3\)", err)
    if not resumed or done["np"] != 2 or done["restarts"] != 1:
        sys.exit(f"FAIL: expected one restart resuming on 2 of 3 ranks:\n{done}\n{err}")
    at = int(resumed.group(1))
    # Epoch 0 goes on from sample at * 96 with global batches of 64 (drop_last), then epoch 1.
    expected = at + (samples - at * 3 * batch) // (2 * batch) + samples // (2 * batch)
    if done["global_step"] != expected or done["steps"] != expected - at:
        sys.exit(f"FAIL: resumed at step {at}, expected to end at step {expected}:\n{done}")
    print(f"ok: {strategy} lost rank 2 at step {at}; finished on 2 ranks at step {expected}, "
          f"test accuracy {done['test_accuracy']:.4f}")


def launched(distml, d, cfg):
    shrink(distml, d, cfg, "allreduce", launched=True)
    p = subprocess.run([distml, "launch", "-n", "2", "--engine", "gloo", "--max-restarts", "2",
                        "--", distml, "train", "--config", cfg], capture_output=True, text=True,
                       timeout=120)
    if (p.returncode != 2 or "set train.checkpoint_dir" not in p.stderr
            or "not restarted" not in p.stderr):
        sys.exit(f"FAIL: launch --max-restarts without a checkpoint folder: expected the ranks to "
                 f"refuse it with exit 2, not restarted (rc {p.returncode}):\n{p.stderr}")
    print("ok: the ranks follow and check the launcher's --min-np and --max-restarts")


def folder_state(folder):
    """Every file of `folder` with its bytes."""
    state = {}
    for name in sorted(os.listdir(folder)):
        with open(f"{folder}/{name}", "rb") as f:
            state[name] = f.read()
    return state


def checkpoint_steps(folder):
    return [int(n[11:23]) for n in written_checkpoints(folder) if n.startswith("checkpoint-")]


def owned(distml, d, cfg):
    ckpt = f"{d}/ckpt"
    common = ["--config", cfg, "--engine", "gloo", "--np", "2", "--json", "--set",
              f"train.checkpoint_dir={ckpt}", "--set", "train.checkpoint_every=40"]
    run_a = dict(os.environ, DISTML_RUN_ID="run-a")
    run_b = dict(os.environ, DISTML_RUN_ID="run-b")
    run(distml, *common, "--set", "train.max_steps=120", env=run_a)
    before = folder_state(ckpt)
    if checkpoint_steps(ckpt) != [80, 120]:
        sys.exit(f"FAIL: run A should have kept steps 80 and 120: {sorted(before)}")
    p = run(distml, *common, "--set", "train.max_steps=60", env=run_b, expect_rc=2)
    if "run run-a" not in p.stderr or f"--resume {ckpt}" not in p.stderr:
        sys.exit(f"FAIL: the refusal should name run A and --resume {ckpt}:\n{p.stderr}")
    if folder_state(ckpt) != before:
        sys.exit(f"FAIL: the refused run changed the folder: {sorted(folder_state(ckpt))}")
    # A file of a third run, under a step name above run A's: a resume of the folder must
    # neither take it nor delete it.
    run(distml, *common[:-4], "--set", f"train.checkpoint_dir={d}/other", "--set",
        "train.checkpoint_every=40", "--set", "train.max_steps=40",
        env=dict(os.environ, DISTML_RUN_ID="run-c"))
    foreign = f"{ckpt}/checkpoint-000000000999.dml"
    shutil.copy(f"{d}/other/checkpoint-000000000040.dml", foreign)
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{ckpt}/checkpoint-000000000160.dml.tmp.{dead.pid}@{host}"
    elsewhere = f"{ckpt}/checkpoint-000000000160.dml.tmp.{dead.pid}@another-host"
    for path in (stale, elsewhere):
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
    p = run(distml, *common, "--set", "train.max_steps=200", "--resume", ckpt, env=run_b)
    resumed = done_line(p)
    if resumed["steps"] != 80 or checkpoint_steps(ckpt) != [160, 200, 999]:
        sys.exit(f"FAIL: B continues run A from its step 120 (80 steps, not from the third run's "
                 f"file) keeping the run's newest 2, 160 and 200, and the third run's file: "
                 f"{resumed['steps']} steps, {sorted(os.listdir(ckpt))}")
    with open(f"{ckpt}/run-id") as f:
        owner = f.read().strip()
    if owner != "run-a" or os.path.exists(stale) or not os.path.exists(elsewhere):
        sys.exit(f"FAIL: expected owner run-a (got {owner}), {stale} removed and {elsewhere} kept")
    if f"removed {stale}" not in p.stderr:
        sys.exit(f"FAIL: the removal of {stale} was not said:\n{p.stderr}")
    print("ok: a fresh run in another run's folder is refused; a resume continues the folder's "
          "run, deletes only that run's files, and a dead writer's temporary file")


def orphans(distml, d, cfg, engine):
    kill_launcher_leaves_no_rank(
        [distml, "train", "--config", cfg, "--engine", engine, "--np", "2"], cfg)


def kill_launcher_leaves_no_rank(command, cfg, env=None):
    """Runs `command` (a launcher of 2 ranks of `distml train --config cfg`, to which it adds
    the settings of a long run) in `env`, SIGKILLs it once they train, and fails unless no
    process of the run is left 5 s later."""
    job = subprocess.Popen([*command, "--json", "--set", "train.max_steps=1000000", "--set",
                            "train.log_every=20"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, env=env)
    job.stdout.readline()  # the first step line: the ranks are training
    ranks = [rank_process(job.pid, r) for r in (0, 1)]
    if None in ranks:
        job.kill()
        sys.exit(f"FAIL: the ranks were not found below the launcher: {ranks}")
    job.kill()  # SIGKILL: nothing of the launcher runs after it
    job.wait()
    time.sleep(5)
    left = subprocess.run(["pgrep", "-f", cfg], capture_output=True, text=True).stdout.split()
    if left:
        for pid in left:
            os.kill(int(pid), signal.SIGKILL)
        sys.exit(f"FAIL: processes of the killed launcher's run still ran 5 s later: {left}")
    print(f"ok: the launcher SIGKILLed; ranks {ranks} were gone 5 s later")


def preempt(distml, d, cfg, engine, sig):
    # The signal comes after step 20. The ranks check for it about every half second (the
    # trainer's stop_agreed), so the run must go on well past that: runs of 600 steps stopped
    # as late as step 499, and one in three ended before the check, with exit 0.
    ckpt, steps = f"{d}/ckpt", 2000
    common = ["--config", cfg, "--engine", engine, "--np", "2", "--json", "--set",
              f"train.max_steps={steps}", "--set", "train.log_every=20", "--set",
              f"train.checkpoint_dir={ckpt}", "--set", "train.checkpoint_every=500"]
    straight = done_line(run(distml, *common[:-4]))
    job = subprocess.Popen([distml, "train", *common], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    job.stdout.readline()  # the first step line: the ranks are training
    job.send_signal(getattr(signal, f"SIG{sig}"))
    _, err = job.communicate(timeout=120)
    stopped = re.search(r"preempted: stopped after step (\d+)", err)
    if job.returncode != 75 or not stopped:
        sys.exit(f"FAIL: expected exit 75 and where the run stopped (rc {job.returncode}):\n{err}")
    at = int(stopped.group(1))
    if at >= steps or checkpoint_steps(ckpt)[-1] != at:
        sys.exit(f"FAIL: stopped at step {at} of {steps}; newest checkpoint "
                 f"{checkpoint_steps(ckpt)}")
    resumed = done_line(run(distml, *common, "--resume", ckpt))
    if resumed["global_step"] != steps or resumed["param_checksum"] != straight["param_checksum"]:
        sys.exit(f"FAIL: resumed from step {at}, ended elsewhere than the straight run:\n"
                 f"{resumed}\n{straight}")
    print(f"ok: SIG{sig} stopped the ranks after step {at} with a checkpoint there (exit 75); "
          f"resumed, they ended on the straight run's parameters ({straight['param_checksum']})")


def timeline(distml, d, cfg):
    run_dir, ckpt = f"{d}/run", f"{d}/ckpt"
    streams = [f"timeline.json.attempt0.rank{r}.jsonl" for r in (0, 1)]

    def streamed_steps(stream):
        try:
            with open(f"{run_dir}/{stream}") as f:
                return sum('"name":"step"' in line for line in f)
        except FileNotFoundError:
            return 0

    # The kill waits until both ranks' streams (appended every 0.25 s) hold a step: under a
    # loaded machine 300 steps could pass between two appends of rank 0's. 1200 steps keep
    # the run going meanwhile.
    done, err = kill_after_first_checkpoint(
        distml, ["train", "--config", cfg, "--engine", "gloo", "--np", "2", "--json",
                 "--max-restarts", "1", "--run-dir", run_dir, "--timeline", "--set",
                 f"train.checkpoint_dir={ckpt}", "--set", "train.checkpoint_every=300",
                 "--set", "train.max_steps=1200"],
        ckpt, 1, ready=lambda: all(streamed_steps(s) for s in streams))
    files = sorted(os.listdir(run_dir))
    if done["restarts"] != 1 or "timeline.attempt1.json" not in files or \
            any(s not in files for s in streams) or any(".attempt1.rank" in f for f in files):
        sys.exit(f"FAIL: expected attempt 0's streams of both ranks and attempt 1's trace file "
                 f"(its streams removed once written): {files}")
    for stream in streams:
        steps = streamed_steps(stream)
        if steps == 0:
            sys.exit(f"FAIL: {stream} holds no step of the killed attempt")
        print(f"ok: {stream}: {steps} steps of the killed attempt")
    page = subprocess.run([distml, "report", run_dir, "--out", f"{d}/report.html"],
                          capture_output=True, text=True, timeout=60)
    if page.returncode != 0:
        sys.exit(f"FAIL: distml report of the restarted run:\n{page.stderr}")
    print("ok: the killed attempt's timeline was streamed by every rank; the restart wrote its own")


def rl(distml, d):
    with open(f"{d}/rl.toml", "w") as f:  # the built-in settings: no target return to stop at
        f.write("[run]\n")
    common = ["rl", "ppo", "--env", "cartpole", "--config", f"{d}/rl.toml", "--engine", "gloo",
              "--np", "2", "--json",
              "--set", "run.env_steps=30000", "--set", "run.eval_episodes=5"]
    p = subprocess.run([distml, *common], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAIL: the straight rl run exited {p.returncode}\n{p.stderr[-3000:]}")
    straight = done_line(p)
    ckpt = f"{d}/rl_ckpt"
    done, err = kill_after_first_checkpoint(
        distml, [*common, "--max-restarts", "1", "--set", f"run.checkpoint_dir={ckpt}", "--set",
                 "run.checkpoint_every=3"], ckpt, 1)
    if done["restarts"] != 1 or "resuming from" not in err or "rank 1" not in err:
        sys.exit(f"FAIL: expected one restart after rank 1, resuming:\n{done}\n{err}")
    if done["env_steps"] != straight["env_steps"]:
        sys.exit(f"FAIL: the restarted run took {done['env_steps']} env steps, a straight run "
                 f"{straight['env_steps']}")
    print(f"ok: ppo restarted once and ended after {done['env_steps']} env steps, as a straight "
          f"run; eval return {done['eval_mean_return']:.1f} vs {straight['eval_mean_return']:.1f}")
    # Preempted: SIGTERM stops the run after an update, with a checkpoint there (exit 75);
    # resumed, it takes the straight run's env steps.
    ckpt = f"{d}/rl_preempted"
    preemptible = [*common, "--set", f"run.checkpoint_dir={ckpt}", "--set",
                   "run.checkpoint_every=1000"]
    job = subprocess.Popen([distml, *preemptible], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    job.stdout.readline()  # the first update line: the ranks are training
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    stopped = re.search(r"preempted: stopped after update (\d+) \((\d+) env steps\)", err)
    if job.returncode != 75 or not stopped or written_checkpoints(ckpt) != ["rl_checkpoint.bin"]:
        sys.exit(f"FAIL: expected exit 75, where the run stopped and its checkpoint "
                 f"(rc {job.returncode}, {written_checkpoints(ckpt)}):\n{err}")
    p = subprocess.run([distml, *preemptible, "--resume", ckpt], capture_output=True, text=True,
                       timeout=300)
    resumed = done_line(p)
    if p.returncode != 0 or resumed["env_steps"] != straight["env_steps"]:
        sys.exit(f"FAIL: resumed after the preemption at {stopped.group(2)} env steps: rc "
                 f"{p.returncode}, {resumed}")
    print(f"ok: ppo preempted after update {stopped.group(1)} ({stopped.group(2)} env steps), "
          f"resumed to the straight run's {resumed['env_steps']} env steps")


def refused(distml, d, cfg):
    p = run(distml, "--config", cfg, "--engine", "gloo", "--np", "2", "--max-restarts", "1",
            expect_rc=2)
    if "set train.checkpoint_dir" not in p.stderr:
        sys.exit(f"FAIL: --max-restarts without checkpoints:\n{p.stderr}")
    p = run(distml, "--config", cfg, "--engine", "gloo", "--np", "2", "--max-restarts", "1",
            "--set", f"train.checkpoint_dir={d}/c", expect_rc=2)
    if "train.checkpoint_every = 0" not in p.stderr:
        sys.exit(f"FAIL: --max-restarts with a checkpoint only at the end:\n{p.stderr}")
    p = run(distml, "--config", cfg, "--engine", "local", "--np", "2", "--max-restarts", "1",
            "--set", f"train.checkpoint_dir={d}/c", expect_rc=2)
    if "local engine" not in p.stderr:
        sys.exit(f"FAIL: --max-restarts on the local engine:\n{p.stderr}")
    every = ["--set", "train.checkpoint_every=40"]
    p = run(distml, "--config", cfg, "--engine", "gloo", "--np", "3", "--min-np", "2", *every,
            "--set", f"train.checkpoint_dir={d}/c", "--set", "strategy.name=ps", "--set",
            "data.dataset=csv", "--set", f"data.path={d}/never_read.csv", expect_rc=2)
    if "--min-np: strategy ps" not in p.stderr:
        sys.exit(f"FAIL: --min-np with a strategy that cannot shrink:\n{p.stderr}")
    p = run(distml, "--config", cfg, "--engine", "gloo", "--np", "3", "--min-np", "2", *every,
            "--set", f"train.checkpoint_dir={d}/c", expect_rc=2)
    if "--min-np: npz" not in p.stderr:
        sys.exit(f"FAIL: --min-np with data each rank reads in part:\n{p.stderr}")
    print("ok: restarts without checkpoints (or with one only at the end) or processes, and "
          "shrinking ps or npz data, are refused")


def stall(distml, d, cfg, engine, variant=""):
    # "late": a timeout shorter than the first warning; the inspector asks 2 s before it.
    # "rl": distml rl ppo, whose ranks all-reduce gradients each update.
    warn_s, timeout_s = {"late": (60, 8), "rl": (3, 8)}.get(variant, (3, 12))
    if variant == "rl":
        command = ["rl", "ppo", "--env", "cartpole", "--set", "run.env_steps=100000000",
                   "--set", f"run.stall_warn_s={warn_s}", "--set", f"run.timeout_s={timeout_s}"]
    else:
        command = ["train", "--config", cfg, "--set", "train.max_steps=1000000", "--set",
                   f"train.stall_warn_s={warn_s}", "--set", f"train.timeout_s={timeout_s}"]
    job = subprocess.Popen([distml, *command, "--engine", engine, "--np", "2", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []  # (seconds since the stop, line) of stderr
    stopped_at = [None]

    def read_stderr():
        for line in job.stderr:
            lines.append((time.time() - (stopped_at[0] or time.time()), line.rstrip()))
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    job.stdout.readline()  # the first step line: the ranks are training
    victim = rank_process(job.pid, 1)
    if victim is None:
        job.kill()
        sys.exit("FAIL: rank 1 not found")
    stopped_at[0] = time.time()
    os.kill(victim, signal.SIGSTOP)
    try:
        rc = job.wait(timeout=timeout_s + 10)
    except subprocess.TimeoutExpired:
        os.kill(victim, signal.SIGKILL)
        job.kill()
        sys.exit(f"FAIL: the job did not end within timeout_s + 10 s of the stop:\n{lines}")
    ended = time.time() - stopped_at[0]
    reader.join(timeout=5)
    stalls = [(t, l) for t, l in lines if "stall: rank 0" in l and "rank 1 (no answer" in l]
    print(*[f"{t:6.1f} s  {l}" for t, l in lines], sep="\n")
    first_report = min(warn_s, timeout_s - 2)
    if not stalls or stalls[0][0] > first_report + 5:
        sys.exit(f"FAIL: no stall report naming rank 1 within {first_report + 5} s of the stop")
    # The timeout's error (a transfer's, or a native collective's, waited for on the
    # communication thread or, the step's last bucket, on the training thread) carries the
    # inspector's report (or, without one, the ranks that did not arrive in the exchange after
    # the timeout: comm/diagnose.h).
    deadline_words = ("not complete after", "timed out", "not finished at the deadline",
                      "not complete at the deadline")
    ends = [l for _, l in lines if any(w in l for w in deadline_words)
            and ("rank 1 (no answer" in l or "did not arrive: 1" in l)]
    if rc == 0 or not ends:
        sys.exit(f"FAIL: expected a failing exit whose timeout error names rank 1 (rc {rc})")
    print(f"ok: rank 1 named {stalls[0][0]:.1f} s after its stop; the job ended after "
          f"{ended:.1f} s (timeout {timeout_s} s), exit {rc}")


def never_joins(distml, d, cfg):
    timeout_s = 5
    env = dict(os.environ, DISTML_LAUNCHED="1", DISTML_ENGINE="gloo", RANK="0", WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    start = time.time()
    p = subprocess.run([distml, "train", "--config", cfg, "--engine", "gloo", "--set",
                        f"train.timeout_s={timeout_s}"], env=env, capture_output=True, text=True,
                       timeout=timeout_s + 10)
    took = time.time() - start
    if p.returncode == 0 or "did not arrive: 1" not in p.stderr:
        sys.exit(f"FAIL: expected a failing exit naming rank 1 (rc {p.returncode}):\n{p.stderr}")
    print(f"ok: rank 1 never joined; rank 0 ended after {took:.1f} s (timeout {timeout_s} s), "
          f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1]}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    distml, scenario = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        cfg = write_config(d)
        if scenario == "rl":
            rl(distml, d)
        elif scenario in ("kill", "stall", "shrink", "orphans", "preempt"):
            {"kill": kill, "stall": stall, "shrink": shrink, "orphans": orphans,
             "preempt": preempt}[scenario](distml, d, cfg, *sys.argv[3:])
        else:
            {"corrupt": corrupt, "refused": refused, "never-joins": never_joins,
             "launched": launched, "owned": owned, "timeline": timeline}[scenario](distml, d, cfg)


if __name__ == "__main__":
    main()
