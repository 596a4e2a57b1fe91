"""A rank that dies mid-job: the survivor's collective raises an error naming it at once, not a
generic shut-down and not at the timeout: distml.CommError from distml.allreduce, or with the
argument "c10d" torch.distributed's error from dist.all_reduce over the distml backend. Rank 1
ends with os._exit(0): its connections close as they do when a rank is killed, and its exit
status does not make the launcher end the survivor before it has spoken (it does that for a
failed rank, as it should). Run under the launcher with gloo (mpirun ends the survivors itself)
and 2 ranks; the test passes on the survivor's line."""
import os
import sys
import time
from datetime import timedelta

import numpy as np

import distml

c10d = sys.argv[1:] == ["c10d"]  # else "distml", or nothing
name = "dist.all_reduce" if c10d else "distml.allreduce"
if c10d:
    import torch
    import torch.distributed as dist

    import distml.torch  # registers the backend

    dist.init_process_group("distml", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    dist.barrier()
    expected, collective = RuntimeError, lambda: dist.all_reduce(torch.ones(10))
else:
    distml.init(timeout=60)
    rank = distml.rank()
    distml.barrier()
    expected, collective = distml.CommError, lambda: distml.allreduce(np.ones(10))
if rank == 1:
    os._exit(0)
start = time.time()
try:
    collective()
    print(f"rank 0: {name} completed without rank 1")
except expected as e:
    waited = time.time() - start
    named = "rank 1" in str(e)
    print(f"rank 0's {name} raised {type(e).__name__} "
          f"{'naming' if named else 'NOT naming'} rank 1 "
          f"{'within 10 s' if waited < 10 else f'only after {waited:.1f} s'}: {e}")
sys.stdout.flush()
os._exit(0)  # torch's gloo store would wait for rank 1 at the exit
