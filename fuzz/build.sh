#!/usr/bin/env bash
# Configures and builds the fuzz targets (fuzz/CMakeLists.txt) with clang++ into FUZZ_BUILD.
# Usage: fuzz/build.sh FUZZ_BUILD MAIN_BUILD [TARGET...]   (no TARGET: every one)
# Exits 77 (skipped) where clang++ or libFuzzer is missing, so that ctest counts the fuzz tests
# as skipped, not passed.
set -euo pipefail
fuzz_build=$1
main_build=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v clang++ > /dev/null; then
  echo "fuzz: clang++ is not installed (Debian package clang): skipped"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' \
  > "$probe/probe.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2> /dev/null;
then
  echo "fuzz: clang++ cannot link -fsanitize=fuzzer,address,undefined (libclang_rt.fuzzer): skipped"
  exit 77
fi

if [ ! -f "$fuzz_build/build.ninja" ]; then
  cmake -S "$here" -B "$fuzz_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
    -DDISTML_MAIN_BUILD="$(cd "$main_build" && pwd)"
fi
# The targets asked for that this machine can build (fuzz/CMakeLists.txt leaves out those whose
# libraries are missing; fuzz/run.sh then reports them skipped).
known=()
for target in "$@"; do
  if ninja -C "$fuzz_build" -t query "$target" > /dev/null 2>&1; then known+=("$target"); fi
done
if [ $# -gt 0 ] && [ ${#known[@]} -eq 0 ]; then exit 0; fi
ninja -C "$fuzz_build" "${known[@]}"
