#!/usr/bin/env bash
# A SIGTERM to `distml launch` reaches every rank: the job ends at once with 128+15.
set -uo pipefail
distml=$1 engine=$2
ranks="sleep 60.$$"  # a command line of this test alone, for pgrep (other tests sleep 60 too)
"$distml" launch -n 2 --engine "$engine" -- $ranks &
pid=$!
sleep 2
start=$SECONDS
kill -TERM $pid
wait $pid
code=$?
elapsed=$((SECONDS - start))
if [[ $elapsed -gt 15 ]]; then echo "launch took ${elapsed}s to stop"; exit 1; fi
if [[ $code -eq 0 ]]; then echo "launch exited 0 after SIGTERM"; exit 1; fi
if pgrep -f "$ranks" >/dev/null; then echo "a rank survived"; pkill -f "$ranks"; exit 1; fi
echo "ok: stopped in ${elapsed}s with code $code"
