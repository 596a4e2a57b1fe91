#!/usr/bin/env bash
# Runs a command and checks its exit code and that its output contains a pattern.
# Usage: expect.sh CODE PATTERN -- CMD...
set -uo pipefail
want_code=$1 pattern=$2
shift 3
out=$("$@" 2>&1)
code=$?
if [[ $code -ne $want_code ]]; then
  echo "expected exit code $want_code, got $code from: $*"
  echo "$out"
  exit 1
fi
if ! grep -qF -- "$pattern" <<<"$out"; then
  echo "output of '$*' lacks: $pattern"
  echo "$out"
  exit 1
fi
echo "ok: exit $code, output contains '$pattern'"
