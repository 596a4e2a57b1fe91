#!/usr/bin/env bash
# distml under a real Slurm: a one-node cluster (Debian's slurmctld and slurmd, auth/none) is
# configured in a temporary folder and started; `srun -n 2 distml train` trains to a done line
# of 2 ranks over gloo (chosen by default there, since plain srun gives MPI no PMIx), over mpi
# with srun --mpi=pmix, and refuses mpi without PMIx; `distml launch` inside salloc takes the
# allocation's task count and starts the ranks with srun; the sbatch example runs to a done
# line. The daemons are shut down and the folder removed whatever happens. Where Slurm is not
# installed or its daemons cannot start here, the test says so and exits 77, which ctest
# counts as skipped, not passed.
# Usage: slurm_cluster.sh DISTML EXAMPLE_SBATCH
set -uo pipefail
distml=$(realpath "$1") example=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
skip() { echo "SKIPPED: $*"; exit 77; }
source "$here/cli_lib.sh"

for tool in slurmctld slurmd srun salloc sbatch sinfo scontrol; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian packages slurmctld, slurmd)"
done
plugins=/usr/lib/x86_64-linux-gnu/slurm-wlm
[[ -f $plugins/auth_none.so ]] || skip "Slurm has no auth/none plugin ($plugins/auth_none.so)"
[[ $(id -u) -eq 0 ]] || skip "slurmd must run as root to start tasks"

# A Slurm job around this test would leak its SLURM_* into ours.
unset "${!SLURM_@}"
dir=$(mktemp -d)
export SLURM_CONF=$dir/slurm.conf
pids=()
cleanup() {
  # Politely first (slurmctld saves its state and tells slurmd to stop), then by force.
  timeout 5 scontrol shutdown >/dev/null 2>&1
  for _ in $(seq 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

# Two ports nothing listens on, for slurmctld and slurmd.
read -r ctld_port slurmd_port < <("$python" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
node=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/state" "$dir/spool"
# One node whose daemons talk over loopback. No cgroups (a container may not delegate them):
# processes are tracked by parent (linuxproc) and tasks are not bound (task/none).
cat >"$SLURM_CONF" <<CONF
ClusterName=distmltest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=10 State=UP
CONF
slurmctld -D -i >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D >"$dir/slurmd.out" 2>&1 &
pids+=($!)
idle=0
for _ in $(seq 150); do  # 15 s: both daemons start in about 1 s
  [[ $(timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null) == idle ]] && { idle=1; break; }
  sleep 0.1
done
if ((!idle)); then
  echo "--- slurmctld:"; tail -n 20 "$dir/slurmctld.out" "$dir/slurmctld.log" 2>/dev/null
  echo "--- slurmd:"; tail -n 20 "$dir/slurmd.out" "$dir/slurmd.log" 2>/dev/null
  skip "the Slurm daemons did not bring node $node to idle within 15 s"
fi
echo "ok: slurmctld and slurmd up, node $node idle with $cpus CPUs"
# The ranks meet at the first host of the node list, by name; where this machine's name does
# not resolve (some containers), at loopback instead.
getent hosts "$node" >/dev/null || export MASTER_ADDR=127.0.0.1

"$python" "$here/make_idx.py" "$dir/data"
cat >"$dir/mlp.toml" <<TOML
[data]
dataset = "mnist"
path = "$dir/data"
[model]
name = "mlp"
[train]
batch_size = 16
max_steps = 4
log_every = 2
TOML

# run_done NAME CMD...: the command prints a done line of 2 ranks. Each job has a time limit
# of a minute (-t 1), and each command 90 s, in case a job waits for its node instead.
run_done() {
  local name=$1 out done
  shift
  out=$(timeout 90 "$@" 2>&1) || fail "$name exited with $?:"$'\n'"$out"
  done=$(grep '"event": *"done"' <<<"$out" | tail -n 1)
  [[ -n $done ]] || fail "$name printed no done line:"$'\n'"$out"
  [[ $("$python" -c 'import json,sys; print(json.loads(sys.argv[1])["np"])' "$done") == 2 ]] ||
    fail "$name: done line is not of 2 ranks: $done"
  echo "ok: $name: done line of 2 ranks"
  last_output=$out
}
train=("$distml" train --config "$dir/mlp.toml" --json)

# Under srun: each task is a rank (SLURM_PROCID), no mpirun.
run_done "srun -n 2 distml train --engine gloo" srun -t 1 -n 2 "${train[@]}" --engine gloo
run_done "srun -n 2 distml train (default engine)" srun -t 1 -n 2 "${train[@]}"
grep -q "they meet over gloo" <<<"$last_output" ||
  fail "the default engine under srun did not say it chose gloo:"$'\n'"$last_output"
run_done "srun --mpi=pmix -n 2 distml train --engine mpi" \
  srun -t 1 --mpi=pmix -n 2 "${train[@]}" --engine mpi
out=$(timeout 90 srun -t 1 -n 2 "${train[@]}" --engine mpi 2>&1)
rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--engine gloo" <<<"$out" ||
  fail "mpi under srun without PMIx: expected exit 2 naming --engine gloo, got $rc:"$'\n'"$out"
echo "ok: mpi under srun without PMIx is refused with exit 2, naming --engine gloo"
out=$(timeout 90 srun -t 1 -n 2 "$distml" launch -- true 2>&1)
rc=$?
[[ $rc -eq 2 ]] && grep -q "each task is a rank already" <<<"$out" ||
  fail "distml launch in an srun task: expected exit 2, got $rc:"$'\n'"$out"
echo "ok: distml launch inside a task of srun -n 2 is refused"

# Inside an allocation: distml launch takes SLURM_NTASKS and starts the ranks with srun.
out=$(timeout 60 salloc -t 1 -n 2 "$distml" launch --engine gloo -- \
  sh -c 'echo "task $SLURM_PROCID of $SLURM_STEP_NUM_TASKS, launched=$DISTML_LAUNCHED"' 2>&1) ||
  fail "distml launch in salloc -n 2:"$'\n'"$out"
for r in 0 1; do
  grep -q "task $r of 2, launched=1" <<<"$out" || fail "no task $r of 2 under salloc:"$'\n'"$out"
done
echo "ok: salloc -n 2 distml launch: 2 srun tasks"
out=$(timeout 60 salloc -t 1 -n 2 "$distml" launch --engine gloo -- \
  sh -c 'exit $((SLURM_PROCID == 1 ? 7 : 0))' 2>&1)
rc=$?
[[ $rc -eq 7 ]] || fail "a failing rank under salloc: expected exit 7, got $rc:"$'\n'"$out"
echo "ok: salloc: a rank's exit code 7 is the job's"
run_done "salloc -n 2 distml train --np 2 (mpi, relaunched under srun)" \
  salloc -t 1 -n 2 "${train[@]}" --np 2
# An error the ranks find, once, as the last line, srun's report kept in the launcher's log
# (salloc -Q: salloc's own lines about the allocation are not distml's to tidy).
for engine in mpi gloo; do
  one_error "/nonexistent/train-images-idx3-ubyte[.gz] not found" timeout 60 salloc -Q -t 1 -n 2 \
    "${train[@]}" --np 2 --engine "$engine" --set data.path=/nonexistent
done

# The sbatch example, as committed, on 2 tasks of 1 CPU.
out=$(cd "$dir" && timeout 90 sbatch --wait -n 2 -c 1 -t 1 -o "$dir/batch.out" \
  --export=ALL,DISTML="$distml",CONFIG="$dir/mlp.toml" "$example" --json 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "sbatch $example exited with $rc: $out"$'\n'"$(cat "$dir/batch.out" 2>&1)"
run_done "sbatch $(basename "$example")" cat "$dir/batch.out"
echo "PASSED"
