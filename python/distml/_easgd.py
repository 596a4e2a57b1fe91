"""DistributedOptimizer's asynchronous "easgd" (asynchronous=True): the C++ trainer's
asynchronous EASGD (train/strategies/easgd_async_strategy.h; Zhang et al. 2015, Algorithm 2),
so that a Python run is the run `distml train` would make. The last rank holds the centre
variable and is the C++ centre itself (easgd_centre_flat.h, over the model's parameters in
place); the other ranks are workers, on this side of the protocol:

  - after every `period`-th step a worker sends its parameters x_i to the centre and waits for
    d = alpha (x_i - centre), which the centre has added to itself; the worker sets
    x_i <- x_i - d. Each worker on its own schedule, with no barrier between them;
  - reconcile() asks the centre for itself ("sync"); once every worker has asked, each gets it
    and installs it, and the workers average their optimizer state;
  - finish() says "stop"; the centre's serve() returns once every worker has;
  - after load_state_dict(), worker 0 sends the centre the model it loaded (the centre
    state_dict() reconciled to), and the centre rank calls serve(resumed=True).
"""
import numpy as np
import torch

import distml
from distml._flat import flatten, unflatten_into

_ds = distml._distml


class ElasticCentre:
    def __init__(self, opt, alpha):
        comm = distml._comm(opt._group)
        if comm.size < 2:
            raise distml.ConfigError("asynchronous easgd needs at least 2 ranks (workers and "
                                     "the centre rank)")
        self._comm, self._alpha = comm, alpha
        self._centre = comm.size - 1
        self.trains = comm.rank < self._centre
        self.workers = comm.split(0 if self.trains else -1, comm.rank)

    def _worker_only(self, what):
        if not self.trains:
            raise distml.UsageError(f"{what} on asynchronous EASGD's centre rank, which serves "
                                    "(serve()) instead of training")

    def _control(self, word):
        distml.send(np.array([word], dtype=np.float64), self._centre, _ds.EASGD_CONTROL_TAG,
                    group=self._comm)

    def _receive(self, flat):
        try:
            distml.recv(flat, self._centre, _ds.EASGD_EXCHANGE_TAG, group=self._comm)
        except distml.TimeoutError as e:
            raise distml.TimeoutError(f"EASGD centre rank {self._centre} did not answer: "
                                      f"{e}") from None

    def exchange(self, params):
        """A worker's elastic update against the centre as it stands."""
        mine = flatten(params)
        out = mine.clone()
        distml.send(out, self._centre, _ds.EASGD_EXCHANGE_TAG, group=self._comm)
        self._receive(out)
        unflatten_into(mine - out, params)

    def sync(self, params):
        """The centre into `params`, once every worker has asked."""
        self._worker_only("reconcile()")
        self._control(_ds.EASGD_SYNC)
        centre = flatten(params)
        self._receive(centre)
        unflatten_into(centre, params)

    def finish(self):
        self._worker_only("finish()")
        self._control(_ds.EASGD_STOP)

    def resume(self, params):
        """Worker 0 hands the centre rank, in serve(resumed=True), the model it loaded."""
        self._worker_only("load_state_dict()")
        if self._comm.rank == 0:
            distml.send(flatten(params), self._centre, _ds.EASGD_RESUME_TAG, group=self._comm)

    def serve(self, params, resumed):
        with torch.no_grad():
            views = [p.detach().numpy() for p in params]
        _ds.easgd_serve(self._comm, views, self._alpha, resumed)
