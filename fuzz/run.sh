#!/usr/bin/env bash
# Runs one fuzz target for SECONDS on a copy of its seed corpus (fuzz/corpus/TARGET), then once
# over every input kept in fuzz/regressions/TARGET. Fails on any crash, leak, timeout, memory
# blow-up or sanitizer report, and leaves the offending input under FUZZ_BUILD/artifacts/.
# Usage: fuzz/run.sh FUZZ_BUILD TARGET SECONDS
# Exits 77 (skipped) when the target was not built (no clang, or no main build to link).
set -euo pipefail
fuzz_build=$1
target=$2
seconds=$3
here=$(cd "$(dirname "$0")" && pwd)
binary=$fuzz_build/$target

if [ ! -x "$binary" ]; then
  echo "fuzz.$target: $binary was not built (see fuzz/build.sh's output): skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$fuzz_build/artifacts"
cp "$here/corpus/$target"/* "$work/corpus/"

# Leaks inside LibTorch, never distml's own, are suppressed per target (fuzz/suppressions/);
# naming their LibTorch frames needs whole stacks, which frame-pointer unwinding cannot give.
if [ -f "$here/suppressions/$target.lsan" ]; then
  export LSAN_OPTIONS="suppressions=$here/suppressions/$target.lsan:print_suppressions=0"
  export ASAN_OPTIONS="fast_unwind_on_malloc=0"
fi

# -timeout: one input taking 10 s is a hang (the seeds take milliseconds). -rss_limit_mb and
# -malloc_limit_mb: an allocation sized from a length field shows up as a finding, not as a
# machine out of memory. ASan's leak check runs at exit and on each finding.
flags=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1
       "-artifact_prefix=$fuzz_build/artifacts/$target-")
set +e
"$binary" "${flags[@]}" -max_total_time="$seconds" "$work/corpus" > "$work/log" 2>&1
status=$?
set -e
grep -E "^(INFO: seed corpus|#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)" \
  "$work/log" || true
if [ "$status" -ne 0 ]; then
  echo "fuzz.$target: FAILED (exit $status); the last lines of its output:"
  tail -n 60 "$work/log"
  exit 1
fi

regressions=("$here/regressions/$target"/*)
if [ -e "${regressions[0]}" ]; then
  if ! "$binary" "${flags[@]}" "${regressions[@]}" > "$work/regressions.log" 2>&1; then
    echo "fuzz.$target: a kept regression input fails again:"
    tail -n 60 "$work/regressions.log"
    exit 1
  fi
  echo "fuzz.$target: ${#regressions[@]} regression input(s) pass"
fi
echo "fuzz.$target: ok ($seconds s)"
