#!/bin/sh
# Stands in for ssh in the tests (distml launch --rsh "sh local_rsh.sh"): runs the command line
# given for HOST here, as sshd would run it there: through a shell, in a session of its own, so
# that neither the launcher's process group nor a parent-death signal reaches the command; only
# its standard input ties it to the launcher. A command killed by a signal ends it with
# 128 + the signal, as a shell reports it (ssh itself exits with 255 then).
# Usage: local_rsh.sh HOST COMMAND-LINE
shift
exec setsid -w sh -c 'sh -c "$1"' local_rsh "$*"
