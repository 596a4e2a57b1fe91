#!/usr/bin/env bash
# `distml launch --netns-cluster`: two emulated hosts of two ranks each run every collective of
# the mpi engine and train over both engines, one of them through a shaped link; a failing rank
# and an interrupt leave no namespace (and with it no link or queue) and no file behind. Where
# this machine cannot create network namespaces the test says so and exits 77, which ctest
# counts as skipped, not passed.
# Usage: netns_cluster.sh DISTML MPI_TESTS
set -uo pipefail
distml=$1 mpi_tests=$2
here=$(cd "$(dirname "$0")" && pwd)
probe=dmlprobe$$
if ! ip netns add "$probe" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root, iproute2 and kernel support)"
  exit 77
fi
ip netns del "$probe"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# What a cluster leaves if not cleaned up: namespaces dml<pid>-*, folders distml-netns-*.
leftovers() { echo "$(ip netns list | grep -c '^dml[0-9]') $(ls /tmp | grep -c '^distml-netns-')"; }
before=$(leftovers)

/usr/bin/python3 "$here/make_idx.py" "$dir/data"
cat >"$dir/lenet.toml" <<TOML
[data]
dataset = "mnist"
path = "$dir/data"
[train]
batch_size = 16
max_steps = 6
log_every = 3
TOML

# Each rank runs on its host, under that host's name.
out=$("$distml" launch --netns-cluster 2x2 -- sh -c hostname 2>&1) || fail "hostname: $out"
[[ $(sort <<<"$(grep -E '^h[01]$' <<<"$out")" | uniq -c | tr -s ' ') == " 2 h0"$'\n'" 2 h1" ]] ||
  fail "expected two ranks on h0 and two on h1, got:"$'\n'"$out"
echo "ok: 2 ranks on each of h0 and h1"

# Every collective, algorithm, dtype and count against the serial reference, across hosts.
out=$("$distml" launch --netns-cluster 2x2 -- "$mpi_tests" \
  --gtest_filter='MpiCollectives.MatchSerialReference*:MpiSplit.*' 2>&1) || fail "collectives:"$'\n'"$out"
grep -q "PASSED" <<<"$out" || fail "collectives did not pass:"$'\n'"$out"
echo "ok: every collective across 2 hosts x 2 ranks (mpi)"

# Training: mpi with PowerSGD through 100 Mbit/s links (gloo trains across emulated hosts in
# ops.restart.elastic.netns, its ranks started by distml launch itself).
for run in "--engine mpi --bandwidth 100mbit"; do
  # shellcheck disable=SC2086
  out=$("$distml" launch --netns-cluster 2x2 $run -- "$distml" train --config "$dir/lenet.toml" \
    --set compress.name=powersgd 2>&1) || fail "train $run:"$'\n'"$out"
  grep -q "test accuracy" <<<"$out" || fail "train $run printed no done line:"$'\n'"$out"
  echo "ok: training across 2 hosts x 2 ranks, $run"
done

# A failing rank: its exit code, and nothing left behind.
"$distml" launch --netns-cluster 2x2 --bandwidth 100mbit -- \
  sh -c 'exit $((OMPI_COMM_WORLD_RANK == 3 ? 4 : 0))' >"$dir/out" 2>&1
rc=$?
[[ $rc -eq 4 ]] || fail "a rank exiting with 4 made launch exit $rc:"$'\n'"$(cat "$dir/out")"
[[ $(leftovers) == "$before" ]] || fail "left behind after a failing rank: $(leftovers) (before: $before)"
echo "ok: a failing rank's code, nothing left behind"

# An interrupt while the ranks run.
"$distml" launch --netns-cluster 2x1 --bandwidth 1gbit -- sleep 60 >"$dir/out" 2>&1 &
launcher=$!
for _ in $(seq 50); do
  [[ $(ip netns list | grep -c '^dml[0-9]') -ge 3 ]] && break
  sleep 0.1
done
sleep 0.5
kill -INT "$launcher"
wait "$launcher"
[[ $(leftovers) == "$before" ]] || fail "left behind after an interrupt: $(leftovers) (before: $before)"
echo "ok: an interrupt ends the ranks, nothing left behind"

# Bad options are usage errors.
for bad in "--netns-cluster 2y2" "--netns-cluster 2x2 --bandwidth fast" "--netns-cluster 2x2 -n 3"; do
  # shellcheck disable=SC2086
  "$distml" launch $bad -- true >"$dir/out" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "launch $bad exited $rc, not 2:"$'\n'"$(cat "$dir/out")"
done
[[ $(leftovers) == "$before" ]] || fail "left behind after bad options: $(leftovers)"
echo "ok: bad options exit 2"
