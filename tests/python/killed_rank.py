"""A rank that dies mid-job: the survivor's collective raises distml.CommError naming it at
once, not a generic shut-down and not at the timeout. Rank 1 ends with os._exit(0): its
connections close as they do when a rank is killed, and its exit status does not make the
launcher end the survivor before it has spoken (it does that for a failed rank, as it should).
Run under the launcher with gloo (mpirun ends the survivors itself) and 2 ranks; the test
passes on the survivor's line."""
import os
import time

import numpy as np

import distml

distml.init(timeout=60)
distml.barrier()
if distml.rank() == 1:
    os._exit(0)
start = time.time()
try:
    distml.allreduce(np.ones(10))
    print("rank 0: the all-reduce completed without rank 1")
except distml.CommError as e:
    waited = time.time() - start
    named = "rank 1" in str(e)
    print(f"rank 0 raised CommError {'naming' if named else 'NOT naming'} rank 1 "
          f"{'within 10 s' if waited < 10 else f'only after {waited:.1f} s'}: {e}")
