"""distml from Python: the same engines and collectives as the C++ library.

Start a script under the launcher, which says to every rank where the others are:

    distml launch -n 2 [--engine gloo] -- /usr/bin/python3 script.py

    import distml, numpy as np
    distml.init()
    x = np.full(4, distml.rank() + 1.0)
    distml.allreduce(x)              # in place: every rank now holds 3.0 (1 + 2)

Arrays are NumPy arrays or CPU torch tensors, contiguous, of float32, float64, float16,
bfloat16 (torch), int32, int64 or uint8; nothing is copied. Each collective (and send, recv)
has an async form that returns a Handle (wait(), test()); the arrays must not change until it
is done.
The GIL is released while a call waits, so Python threads go on. Errors are distml.Error and
its kinds: CommError, TimeoutError (naming the ranks that did not arrive), UsageError and
ConfigError (ValueErrors). docs/python.md has the whole API.
"""

import numpy as _np

from ._distml import (  # noqa: F401  (re-exported)
    CommError,
    Communicator,
    ConfigError,
    DataError,
    Error,
    Handle,
    TimeoutError,
    UsageError,
)
from . import _distml

__all__ = [
    "init", "is_initialized", "world", "rank", "size", "local_rank", "allreduce", "broadcast",
    "allgather", "reduce_scatter", "alltoall", "send", "recv", "barrier", "split",
    "ShardedSampler", "Communicator", "Handle", "Error", "CommError", "TimeoutError",
    "UsageError", "ConfigError", "DataError",
]

_world = None


def init(timeout=300.0, stall_warn=0.0):
    """Joins the world `distml launch` started (its engine and ranks); returns the world's
    Communicator. `timeout`: seconds before a blocked call raises TimeoutError naming the
    ranks it waited for; `stall_warn` > 0: after that many seconds in one call, log who is
    missing. Calling it again returns the same world."""
    global _world
    if _world is None:
        _world = _distml.connect(float(timeout), float(stall_warn))
    return _world


def is_initialized():
    return _world is not None


def world():
    """The Communicator of every rank; UsageError before init()."""
    if _world is None:
        raise UsageError("distml.init() has not been called")
    return _world


def rank():
    return world().rank


def size():
    return world().size


def local_rank():
    """This rank's place among the ranks of its host (0 for the first)."""
    return world().local_rank


def _array(x):
    """(what the engine reads or writes, its dtype name or ""): a NumPy view of a torch
    tensor, the array itself otherwise."""
    if isinstance(x, _np.ndarray):
        return x, ""
    if type(x).__module__.startswith("torch"):
        if x.device.type != "cpu":
            raise UsageError(f"a tensor on {x.device} cannot be communicated: distml runs on CPU")
        if not x.is_contiguous():
            raise UsageError("the tensor is not contiguous: communicate x.contiguous()")
        import torch

        if x.dtype == torch.bfloat16:
            return x.detach().view(torch.int16).numpy(), "bf16"
        return x.detach().numpy(), ""
    raise UsageError(f"cannot communicate a {type(x).__name__}: pass a NumPy array or a torch "
                     "tensor")


def _like(x, shape):
    """A new array or tensor of x's kind and dtype."""
    if isinstance(x, _np.ndarray):
        return _np.empty(shape, dtype=x.dtype)
    import torch

    return torch.empty(shape, dtype=x.dtype)


def _comm(group):
    return world() if group is None else group


def _in_place(name, x, group, async_op, *extra):
    a, dtype = _array(x)
    c = _comm(group)
    if async_op:
        return getattr(c, name + "_async")(a, *extra, dtype)
    getattr(c, name)(a, *extra, dtype)
    return x


def allreduce(x, op="sum", algorithm="auto", group=None, async_op=False):
    """Reduces x across the ranks in place (op: sum, avg, min, max, prod; algorithm: auto,
    native, ring, hd, tree, hierarchical, shm). Returns x, or a Handle with async_op."""
    return _in_place("allreduce", x, group, async_op, op, algorithm)


def broadcast(x, root=0, algorithm="auto", group=None, async_op=False):
    """Overwrites x with root's x on every rank. Returns x, or a Handle with async_op."""
    return _in_place("broadcast", x, group, async_op, root, algorithm)


def _gathered(x, out, shape, name, group, async_op, *extra):
    c = _comm(group)
    if out is None:
        out = _like(x, shape)
    a, dtype = _array(x)
    o, _ = _array(out)
    if o.size * o.itemsize != _np.prod(shape, dtype=_np.int64) * a.itemsize:
        raise UsageError(f"{name}: out has {o.size} elements; expected shape {tuple(shape)}")
    if async_op:
        return out, getattr(c, name + "_async")(a, o, *extra, dtype)
    getattr(c, name)(a, o, *extra, dtype)
    return out


def allgather(x, out=None, group=None, async_op=False):
    """Every rank's x stacked in rank order: shape (size, *x.shape). With async_op, returns
    (out, Handle)."""
    n = _comm(group).size
    return _gathered(x, out, (n, *x.shape), "allgather", group, async_op)


def reduce_scatter(x, out=None, op="sum", group=None, async_op=False):
    """Reduces x (whose first dimension is size x k) across the ranks and keeps this rank's
    k rows: shape (k, *x.shape[1:]). With async_op, returns (out, Handle)."""
    n = _comm(group).size
    if x.shape[0] % n:
        raise UsageError(f"reduce_scatter: the first dimension ({x.shape[0]}) is not a multiple "
                         f"of the {n} ranks")
    return _gathered(x, out, (x.shape[0] // n, *x.shape[1:]), "reduce_scatter", group, async_op,
                     op)


def alltoall(x, out=None, group=None, async_op=False):
    """Rank r's block q (x's first dimension cut into size blocks) goes to rank q's block r.
    With async_op, returns (out, Handle)."""
    n = _comm(group).size
    if x.shape[0] % n:
        raise UsageError(f"alltoall: the first dimension ({x.shape[0]}) is not a multiple of "
                         f"the {n} ranks")
    return _gathered(x, out, tuple(x.shape), "alltoall", group, async_op)


def send(x, dst, tag=0, group=None, async_op=False):
    """Sends x to rank dst, whose receive names this rank and `tag` (0 to 2^20 - 1) and has
    x's size. Returns x, or a Handle with async_op (x must stay unchanged until it is done)."""
    return _in_place("send", x, group, async_op, dst, tag)


def recv(x, src, tag=0, group=None, async_op=False):
    """Receives into x what rank src sends with `tag`; the message must have x's size. Returns
    x, or a Handle with async_op."""
    return _in_place("recv", x, group, async_op, src, tag)


def barrier(group=None):
    _comm(group).barrier()


def split(color, key=0, group=None):
    """The ranks that pass the same color form a group, ordered by key then rank; a negative
    color joins none (returns None). Every rank of `group` (the world by default) must call it."""
    return _comm(group).split(color, key)


class ShardedSampler:
    """This rank's batches, as the C++ trainer takes them (docs/training.md, "One step"): each
    epoch's order is a shuffle of range(dataset_size) by (seed, epoch), step t owns the window
    [t G, (t+1) G) of it, G = batch_size x ranks, and rank r takes the window's r-th block of
    batch_size; the last incomplete window is dropped. So N ranks with batch b see what one
    rank with batch N b sees, whatever N, and a Python run sees the rows `distml train` would.
    A batch sampler for torch's DataLoader:

        sampler = distml.ShardedSampler(len(dataset), batch_size=32, seed=1)
        loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader: ...
    """

    def __init__(self, dataset_size, batch_size, seed=1, group=None, drop_last=True):
        c = _comm(group)
        self._sampler = _distml.ShardedSampler(int(dataset_size), c.size, c.rank,
                                               int(batch_size), int(seed), bool(drop_last))
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return self._sampler.steps_per_epoch()

    def indices(self, epoch, step):
        """This rank's rows at (epoch, step)."""
        return self._sampler.indices(epoch, step)

    def __iter__(self):
        for step in range(len(self)):
            yield self._sampler.indices(self.epoch, step)
