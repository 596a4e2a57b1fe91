"""DistributedOptimizer's gradient compression: the C++ trainer's compressors
(train/compress/compressor.h, bound in _distml) used as its strategies use them, so that a
Python run compresses what `distml train` would, with the same random draws and error
feedback. Under "allreduce" (and "post_local_sgd"'s warm-up) each bucket's average is the
compressor's, bucket by bucket after backward (allreduce_strategy.h); under "local_sgd" (and
"post_local_sgd" after its warm-up) each average sends the compressed change of the parameters
since the last average, the anchor (local_sgd_strategy.h); under "ps" each worker packs its
buckets for the servers, which unpack them (ps_strategy.h). Before `warmup_steps`, plain
averages (not under "ps", which compresses every push)."""
import torch

import distml
from distml._flat import flatten, unflatten_into

STRATEGIES = ("allreduce", "local_sgd", "post_local_sgd", "ps")
KEYS = ("name", "ratio", "levels", "rank", "error_feedback", "warmup_steps", "seed")


def options(compression):
    """The C++ CompressOptions from a compressor's name or a dict of the [compress] keys
    (docs/training.md); seed is train.seed's default, 1, unless given."""
    spec = {"name": compression} if isinstance(compression, str) else dict(compression)
    o = distml._distml.CompressOptions()
    o.seed = 1
    for key, value in spec.items():
        if key not in KEYS:
            raise distml.ConfigError(f"compression: unknown key '{key}'; expected one of "
                                     f"{', '.join(KEYS)}")
        try:
            setattr(o, key, value)
        except TypeError:
            raise distml.ConfigError(f"compression: {key} = {value!r} has the wrong type "
                                     f"(as compress.{key} in docs/training.md)") from None
    if o.name not in distml._distml.compressor_names():
        raise distml.ConfigError(f"compression: unknown compressor '{o.name}'; expected one "
                                 f"of {', '.join(distml._distml.compressor_names())}")
    return o


class Compression:
    def __init__(self, opt, compression):
        if opt.strategy not in STRATEGIES:
            raise distml.UsageError(f'compression is offered with {", ".join(STRATEGIES)}, not '
                                    f'"{opt.strategy}"')
        params = opt._params
        dtypes = {p.dtype for p in params}
        if len(dtypes) > 1:
            raise distml.ConfigError("compression needs one dtype for the whole model, not "
                                     f"{sorted(map(str, dtypes))}")
        dtype = {torch.float32: "f32", torch.float64: "f64"}.get(dtypes.pop())
        if dtype is None:
            raise distml.ConfigError(f"compression needs float32 or float64 parameters, not "
                                     f"{params[0].dtype}")
        o = options(compression)
        self.packs = opt.strategy == "ps"  # for the servers, which unpack each worker's
        if self.packs and o.warmup_steps > 0:
            raise distml.ConfigError(f"compression: warmup_steps = {o.warmup_steps}: strategy ps "
                                     "compresses every push (its servers post receives of the "
                                     "packed size)")
        self.options = o
        self.warmup_steps = o.warmup_steps
        self._buckets = self._model = self._anchor = None
        if opt.strategy != "local_sgd":
            shapes = [[list(params[i].shape) for i in members] for members in opt._buckets]
            self._buckets = distml._distml.BucketCompressor(o, shapes, dtype)
        if opt.strategy in ("local_sgd", "post_local_sgd"):
            # The local half counts its steps from the end of post_local_sgd's warm-up.
            local = options(compression)
            local.warmup_steps = max(0, o.warmup_steps - opt._warmup) \
                if opt.strategy == "post_local_sgd" else o.warmup_steps
            self._local_warmup = local.warmup_steps
            self._model = distml._distml.BucketCompressor(
                local, [[list(p.shape) for p in params]], dtype)

    def compresses_gradients(self, steps):
        """Whether the gradients of the step after `steps` go through the compressor."""
        return self._buckets is not None and not self.packs and steps >= self.warmup_steps

    def reduce_bucket(self, flat, bucket, step, comm):
        """Collective: `flat` becomes the compressed average of bucket `bucket` at `step`."""
        self._buckets.reduce(flat.numpy(), bucket, step, comm)

    def packed_bytes(self, bucket):
        return self._buckets.packed_bytes(bucket)

    def pack(self, flat, bucket, step, rank, out):
        """A parameter server worker's push of bucket `bucket` at `step`, packed into `out`."""
        self._buckets.pack(flat.numpy(), bucket, step, rank, out)

    def before_local_steps(self, params):
        """Before local SGD's first update: the model its first average starts from."""
        if self._model is not None and self._anchor is None:
            self._anchor = flatten(params)

    def average_parameters(self, opt, local, comm):
        """Local SGD's average after `local` local steps: the anchor plus the compressed
        average of each replica's change since it, past the compressor's warm-up; before, the
        exact average, which becomes the anchor."""
        if self._model is not None and local > self._local_warmup:
            change = flatten(opt._params) - self._anchor
            self._model.reduce(change.numpy(), 0, local, comm)
            self._anchor += change
            unflatten_into(self._anchor, opt._params)
            return
        opt._average(opt._params)
        self.averaged_exactly(opt._params)

    def averaged_exactly(self, params):
        """After an exact average (reconcile()): each change from it is delivered whole."""
        if self._model is not None:
            self._anchor = flatten(params)

    def state_dict(self):
        return {"buckets": self._buckets.save_state() if self._buckets else None,
                "model": self._model.save_state() if self._model else None,
                "anchor": None if self._anchor is None else self._anchor.clone()}

    def load_state_dict(self, state):
        if self._buckets is not None:
            self._buckets.load_state(state["buckets"])
        if self._model is not None:
            self._model.load_state(state["model"])
        self._anchor = None if state["anchor"] is None else state["anchor"].clone()
