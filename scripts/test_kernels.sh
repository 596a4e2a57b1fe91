#!/usr/bin/env bash
# Runs the whole test suite once under each CPU kernel choice that LibTorch and OpenBLAS make
# by themselves on other machines, so that a tolerance that only holds for this machine's
# kernels fails here rather than on the next machine. Expects a built tree (make build).
#
#   scripts/test_kernels.sh [BUILD_DIR]     (make test-kernels; about 5 x the suite's time)
#
# Settings: LibTorch's ATen dispatch forced to each capability (default = no vector
# instructions, avx2, avx512; a capability the CPU lacks is skipped with a line saying so),
# then OpenBLAS forced to two core types other than the one in force here. Prints one line per
# setting and exits non-zero if any setting failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f $build/CTestTestfile.cmake ]] || { echo "test_kernels: no tests in $build; run make build first" >&2; exit 2; }

has_flag() { grep -qw "$1" /proc/cpuinfo; }

# The OpenBLAS core type this machine uses now (the variable, else what OpenBLAS detects).
own_blas=${OPENBLAS_CORETYPE:-detected}
blas_types=()
for t in Sandybridge Zen Haswell; do
  [[ ${t,,} == "${own_blas,,}" ]] || blas_types+=("$t")
done
blas_types=("${blas_types[@]:0:2}")

settings=("ATEN_CPU_CAPABILITY=default" "ATEN_CPU_CAPABILITY=avx2" "ATEN_CPU_CAPABILITY=avx512")
for t in "${blas_types[@]}"; do settings+=("OPENBLAS_CORETYPE=$t"); done

failed=0
summary=()
for setting in "${settings[@]}"; do
  case $setting in
    *=avx2) has_flag avx2 || { summary+=("$setting: skipped, the CPU has no AVX2"); continue; } ;;
    *=avx512) has_flag avx512f || { summary+=("$setting: skipped, the CPU has no AVX-512"); continue; } ;;
  esac
  log=$build/test-kernels-${setting//[=]/-}.log
  echo "test_kernels: ctest under $setting (log: $log)"
  start=$SECONDS
  if env "$setting" ctest --test-dir "$build" --output-on-failure --timeout 900 >"$log" 2>&1; then
    result="passed"
  else
    result="FAILED"
    failed=1
  fi
  summary+=("$setting: $result, $(grep -E 'tests passed|tests failed' "$log" | tail -n 1) ($((SECONDS - start)) s)")
done
printf '%s\n' "${summary[@]}"
exit $failed
