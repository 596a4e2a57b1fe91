"""Hosts lost and joined. Usage: hosts_cli.py DISTML SCENARIO:
  elastic.netns  3 emulated hosts of 1 gloo rank (network namespaces), --min-np 1, --max-np 2
                 and a host discovery script listing h0 and h1: host h1 is lost (its rank
                 killed, the script no longer lists it) after the first checkpoint, and the job
                 goes on on h0; then the script lists h2, which joins at a checkpoint. The job
                 ends with exit 0 on h0 and h2 at the step where its 8 epochs end given where the
                 world changed (each epoch's samples once). Exit 77 (skipped) where namespaces
                 cannot be made
  elastic.rsh    the same on "real" hosts 127.0.0.1, .2 and .3 (--hosts, started through
                 --rsh tests/ops/local_rsh.sh, a stand-in for ssh that runs the command here in
                 a session of its own): distml launch starts the ranks without mpirun, carries
                 their folder and environment in the remote command line and gives its order to
                 checkpoint on their standard input
  orphans.rsh    2 such "real" hosts; the launcher SIGKILLed: no rank is left 5 s later (a
                 remote rank's parent lives on; it ends because its orders' channel closed)
  host-lost      2 emulated hosts (network namespaces) of 1 rank; host 1's link goes down while
                 training: the job must end (exit non-zero) within train.timeout_s + 10 s
                 and leave no namespace or process behind. Exit 77 (skipped) where namespaces
                 cannot be made"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from restart_cli import (HERE, done_line, epochs_of_csv, free_port,
                         kill_launcher_leaves_no_rank, rank_process, write_config,
                         written_checkpoints)


def need_namespaces():
    """Exits 77 (skipped) where network namespaces cannot be made."""
    probe = f"dmlprobe{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        print("SKIPPED: cannot create network namespaces here (needs root and iproute2)")
        sys.exit(77)
    subprocess.run(["ip", "netns", "del", probe], check=True)


def host_lost(distml, d):
    need_namespaces()
    timeout_s = 10
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "cli", "make_idx.py"),
                    f"{d}/idx"], check=True, capture_output=True)
    with open(f"{d}/lenet.toml", "w") as f:
        f.write(f'[data]\ndataset = "mnist"\npath = "{d}/idx"\n[train]\nbatch_size = 16\n'
                f'max_steps = 1000000\nlog_every = 20\ntimeout_s = {timeout_s}\n')
    job = subprocess.Popen([distml, "launch", "--netns-cluster", "2x1", "--engine", "mpi", "--",
                            distml, "train", "--config", f"{d}/lenet.toml", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job.stdout.readline()  # the first step line: both hosts train
    switch = f"dml{job.pid}-sw"
    subprocess.run(["ip", "netns", "exec", switch, "ip", "link", "set", "v1", "down"], check=True)
    cut_at = time.time()
    # Rank 0 times out (timeout_s); its stall inspector named rank 1 2 s before, so it tells
    # the others it arrived (0.5 s) and exits; mpirun reports the failure and then waits for
    # the lost host's daemon, so distml launch stops it 6 s after that report (launch.cc,
    # mpirun_teardown_grace): about timeout_s + 7 s. The fault suite's bound is timeout_s + 10 s.
    limit = timeout_s + 10
    try:
        _, err = job.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit(f"FAIL: the job did not end within {limit} s of losing host 1")
    took = time.time() - cut_at
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                      text=True).stdout.split() if n.startswith(f"dml{job.pid}")]
    ranks = subprocess.run(["pgrep", "-f", f"{d}/lenet.toml"], capture_output=True,
                           text=True).stdout.split()
    if job.returncode == 0 or left or ranks:
        sys.exit(f"FAIL: exit {job.returncode}, namespaces left {left}, processes left {ranks}:"
                 f"\n{err[-3000:]}")
    print(f"ok: host 1 lost; the job ended {took:.1f} s later (timeout {timeout_s} s), exit "
          f"{job.returncode}, nothing left")


def final_step(samples, batch, epochs, phases):
    """The global step at which `epochs` epochs end when the world is phases[i][1] ranks from
    global step phases[i][0] on: the sampler's arithmetic (data/sharded_sampler.h), with
    drop_last, each world going on from the first sample of the epoch the last had not taken
    (the sampler's tests check that no sample is then skipped or taken twice)."""
    step, epoch, offset, taken_steps = 0, 0, 0, 0
    world, changes = phases[0][1], dict(phases[1:])
    while epoch < epochs:
        if step in changes:
            offset = min(offset + taken_steps * batch * world, samples)
            taken_steps, world = 0, changes.pop(step)
        if offset + (taken_steps + 1) * batch * world > samples:  # no whole global batch left
            epoch, offset, taken_steps = epoch + 1, 0, 0
            continue
        taken_steps += 1
        step += 1
    return step


def elastic(distml, d, cfg, way):
    """See the module's doc: hosts A, B -> A (B lost) -> A, C (C joins)."""
    if way == "netns":
        need_namespaces()
        a, b, c = "h0", "h1", "h2"
        reach = ["--netns-cluster", "3x1"]
    else:
        a, b, c = "127.0.0.1", "127.0.0.2", "127.0.0.3"
        reach = ["--hosts", f"{a}:1,{b}:1", "--rsh", f"sh {HERE}/local_rsh.sh"]
    env = loopback_port() if way == "rsh" else None
    hosts, discover = f"{d}/hosts", f"{d}/discover.sh"
    with open(hosts, "w") as f:
        f.write(f"{a}\n{b}\n")
    with open(discover, "w") as f:
        f.write(f"#!/bin/sh\ncat {hosts}\n")
    os.chmod(discover, 0o755)
    batch, samples, epochs = 32, 4000, 8
    # Host C joins while host A trains alone: seconds (a restart's back-off of 1 s, the
    # start, the discovery script's next turn within 2 s, the ranks' next check within 0.5 s;
    # 4.4 s in a full make test, 6.6 s beside two fuzzers). Rank 0 made 20 times slower (about
    # 10 ms a step here) takes its 8 epochs alone (1000 steps) in about 10 s.
    slow = ["--set", "train.slow_rank=0", "--set", "train.slow_factor=20"]
    job = subprocess.Popen([distml, "launch", *reach, "--engine", "gloo",
                            "--min-np", "1", "--max-np", "2", "--host-discovery", discover,
                            "--max-restarts", "2", "--", distml, *epochs_of_csv(d, cfg, epochs),
                            *slow],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    err, seen_at = [], []  # stderr's lines, and when each came

    def read():
        for line in job.stderr:
            err.append(line)
            seen_at.append(time.time())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def first(text):  # when `text` was first seen on stderr, or None
        return next((t for line, t in zip(err, seen_at) if text in line), None)

    def wait_for(text, what):
        deadline = time.time() + 120
        while time.time() < deadline and first(text) is None:
            time.sleep(0.01)
        if first(text) is None:
            job.kill()
            sys.exit(f"FAIL: {what} did not happen within 120 s:\n{''.join(err)[-3000:]}")

    deadline = time.time() + 120
    while time.time() < deadline and not written_checkpoints(f"{d}/ckpt"):
        time.sleep(0.005)
    victim = rank_process(job.pid, 1)
    if victim is None:
        job.kill()
        sys.exit("FAIL: no checkpoint appeared, or rank 1 was not found, within 120 s")
    with open(hosts, "w") as f:  # host B is lost: its rank dies, discovery no longer lists it
        f.write(f"{a}\n")
    os.kill(victim, signal.SIGKILL)
    lost_at = time.time()
    # C is listed once A trains alone: listed sooner, it would take B's place at the restart.
    wait_for(f"1 rank on {a}:1", f"a restart on host {a} alone")
    with open(hosts, "w") as f:  # host C is available
        f.write(f"{a}\n{c}\n")
    listed_at = time.time()
    out = job.stdout.read()  # not communicate(): the reader takes stderr
    job.wait(timeout=300)
    reader.join()
    text = "".join(err)
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                      text=True).stdout.split() if n.startswith(f"dml{job.pid}")]
    if job.returncode != 0 or left:
        sys.exit(f"FAIL: exit {job.returncode}, namespaces left {left}:\n{text[-3000:]}")
    done = done_line(subprocess.CompletedProcess([], 0, out, text))
    resumes = [(int(m.group(1)), int(m.group(2))) for m in re.finditer(
        r"resuming from \S+ at step (\d+) on (\d+) ranks?", text)]
    worlds = re.findall(r"distml launch: \d+ ranks? on (.*)", text)
    if (f"host {c} is available" not in text or [w for _, w in resumes] != [1, 2]
            or done["np"] != 2 or worlds != [f"{a}:1, {b}:1", f"{a}:1", f"{a}:1, {c}:1"]):
        sys.exit(f"FAIL: expected hosts {a}, {b} -> {a} -> {a}, {c} (worlds {worlds}, resumes "
                 f"{resumes}, np {done['np']}):\n{text[-3000:]}")
    expected = final_step(samples, batch, epochs, [(0, 2), *resumes])
    if done["global_step"] != expected:
        sys.exit(f"FAIL: resumed at {resumes}: expected the {epochs} epochs to end at step "
                 f"{expected}, not {done['global_step']}:\n{text[-3000:]}")
    print(f"ok ({way}): hosts {a}, {b}; {b} lost, resumed at step {resumes[0][0]} on {a} "
          f"(training again {first('on 1 rank (it was') - lost_at:.1f} s after the loss); {c} "
          f"listed: resumed at step {resumes[1][0]} on {a}, {c} "
          f"{first('on 2 ranks (it was') - listed_at:.1f} s after; the {epochs} epochs ended at "
          f"step {expected}, test accuracy {done['test_accuracy']:.4f}")


def loopback_port():
    """The environment with a MASTER_PORT of its own: the "hosts" of the rsh cases are this
    machine's, where two cases run at once would otherwise both meet at 29500."""
    return {**os.environ, "MASTER_PORT": str(free_port())}


def orphans_rsh(distml, d, cfg):
    kill_launcher_leaves_no_rank(
        [distml, "launch", "--engine", "gloo", "--hosts", "127.0.0.1:1,127.0.0.2:1", "--rsh",
         f"sh {HERE}/local_rsh.sh", "--", distml, "train", "--config", cfg], cfg,
        loopback_port())


def main():
    distml, scenario = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as d:
        if scenario == ["host-lost"]:
            host_lost(distml, d)
        elif scenario[0] == "elastic":
            elastic(distml, d, write_config(d), scenario[1])
        else:
            orphans_rsh(distml, d, write_config(d))


if __name__ == "__main__":
    main()
