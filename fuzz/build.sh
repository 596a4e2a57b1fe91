#!/usr/bin/env bash
# Configures and builds the fuzz targets (fuzz/CMakeLists.txt) with clang++ into FUZZ_BUILD.
# Usage: fuzz/build.sh FUZZ_BUILD MAIN_BUILD
# Exits 77 (skipped) where clang++ or libFuzzer is missing, so that ctest counts the fuzz tests
# as skipped, not passed.
set -euo pipefail
fuzz_build=$1
main_build=$2
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
ninja -C "$fuzz_build"
