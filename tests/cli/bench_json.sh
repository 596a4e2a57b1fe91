#!/usr/bin/env bash
# Runs `distml bench ARGS --json` and checks its rows. Usage: bench_json.sh DISTML ROWS BASELINE ARGS...
set -euo pipefail
distml=$1 rows=$2 baseline=$3
shift 3
"$distml" bench "$@" --json | /usr/bin/python3 "$(dirname "$0")/check_bench_json.py" "$rows" "$baseline"
