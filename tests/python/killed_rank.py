"""A rank killed mid-job: the survivor's collective raises distml.CommError naming it at once,
not a generic shut-down and not at the timeout. Run under the launcher (gloo: mpirun would
end the survivors itself) with 2 ranks; the test passes on the survivor's line."""
import os
import signal
import time

import numpy as np

import distml

distml.init(timeout=60)
distml.barrier()
if distml.rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
start = time.time()
try:
    distml.allreduce(np.ones(10))
    print("rank 0: the all-reduce completed without rank 1")
except distml.CommError as e:
    waited = time.time() - start
    named = "rank 1" in str(e)
    print(f"rank 0 raised CommError {'naming' if named else 'NOT naming'} rank 1 "
          f"{'within 10 s' if waited < 10 else f'only after {waited:.1f} s'}: {e}")
