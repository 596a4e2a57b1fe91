# Shared by the CLI test scripts (sourced): fail with a message, or expect an exit code and a
# pattern in a command's output.
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect CODE PATTERN CMD...
  local code=$1 pattern=$2 out rc
  shift 2
  out=$("$@" 2>&1)
  rc=$?
  [[ $rc -eq $code ]] || fail "expected exit $code, got $rc from: $*"$'\n'"$out"
  grep -qF -- "$pattern" <<<"$out" || fail "output of '$*' lacks: $pattern"$'\n'"$out"
  echo "ok: exit $rc, '$pattern'"
}
