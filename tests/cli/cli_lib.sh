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

# The error of a run's ranks, whatever the engine and form: once, as the last line, naming the
# rank, with mpirun's and Slurm's reports in the launcher's log.
one_error() {  # one_error PATTERN CMD...
  local pattern=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  [[ $rc -eq 2 ]] || fail "expected exit 2, got $rc from: $*"$'\n'"$out"
  local last
  last=$(tail -n 1 <<<"$out")
  [[ $last == "distml: error: rank "[0-9]": "* && $last == *"$pattern"* ]] ||
    fail "the last line of '$*' is not the error naming a rank and '$pattern':"$'\n'"$out"
  [[ $(grep -cF -- "$pattern" <<<"$out") -eq 1 ]] || fail "the error is said more than once:"$'\n'"$out"
  grep -qiE -- "mpirun|srun:|slurmstepd|-{20}|frame #" <<<"$out" &&
    fail "a launcher's report or a stack trace:"$'\n'"$out"
  echo "ok: '$*': one line: $last"
}
