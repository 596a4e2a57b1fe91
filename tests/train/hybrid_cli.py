"""`distml train` with strategy hybrid (sparse embedding rows to their owners, the rest by
all-reduce) on a fastText model, as a user runs it. Usage: hybrid_cli.py DISTML SCENARIO:
  equal      hybrid and allreduce from one seed end at the same test loss and accuracy, and
             the hybrid sends >= 10x fewer bytes (local engine, 3 ranks)
  resume ENGINE  2 ranks as processes: 4 steps, then a resume for 4 more, end where 8 steps
             straight do
  bad-config an optimizer the row update cannot follow, and a model without a sparse
             embedding, stop with exit 2 and a message naming the key or the model"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from distml_cli import check_resume, done_line, run  # noqa: E402

BUCKETS, DIM, CLASSES, LENGTH = 5000, 16, 4, 8


def make_data(path):
    """Each class draws 60% of its ids from 100 of its own, the rest from 999 shared ones:
    learnable in 30 steps, and a batch of 16 rows touches at most 128 of the 5000 rows.
    fastText's mean over a row's ids with a zero output layer learns slowly at first: it needs
    a large learning rate (fastText's per-sample rate times the batch)."""
    rng = np.random.default_rng(0)
    n = 800
    y = rng.integers(0, CLASSES, n)
    own = 1 + y[:, None] * 1000 + rng.integers(0, 100, (n, LENGTH))
    shared = 4001 + rng.integers(0, 999, (n, LENGTH))
    x = np.where(rng.random((n, LENGTH)) < 0.6, own, shared).astype(np.float32)
    x[:, LENGTH - 2:] *= rng.random((n, 2)) < 0.5  # some rows end in padding (id 0)
    np.savez(path, x=x, y=y.astype(np.int64))


def write_config(d):
    path = f"{d}/run.toml"
    with open(path, "w") as f:
        f.write(f"""[data]
dataset = "npz"
path = "{d}/text.npz"
[model]
name = "fasttext"
vocab_size = {BUCKETS}
embedding_dim = {DIM}
[optim]
name = "sgd"
lr = 20.0
[train]
batch_size = 16
max_steps = 30
log_every = 10
[strategy]
name = "hybrid"
""")
    return path


def equal(distml, d, cfg):
    common = ["--config", cfg, "--engine", "local", "--np", "3", "--json"]
    hybrid = done_line(run(distml, *common))
    dense = done_line(run(distml, *common, "--set", "strategy.name=allreduce"))
    # Plain SGD makes the row update the dense update (the rows no rank touched have a zero
    # gradient): the runs differ only in float32 summation order, ~1e-7 relative per sum.
    # Even if 30 steps amplified that a thousandfold it would stay at 1e-4; the bound, 1e-3,
    # is ten times that (measured: ~4e-8). A wrong row, scale or learning rate moves the loss
    # by percents. A prediction can flip only where two logits tie within that noise:
    # at most one of the test rows is allowed to.
    n_test = 80
    if abs(hybrid["test_loss"] - dense["test_loss"]) > 1e-3 * dense["test_loss"] or \
            abs(hybrid["test_accuracy"] - dense["test_accuracy"]) > 1.0 / n_test:
        sys.exit(f"FAIL: hybrid {hybrid} and allreduce {dense} differ")
    if dense["test_accuracy"] < 0.5:
        sys.exit(f"FAIL: the model did not learn (accuracy {dense['test_accuracy']}): {dense}")
    # Dense: the whole 5000 x 16 table each step. Hybrid: at most 16 rows x 8 ids of pairs
    # and as many updated rows, 2 x 128 x (8 + 64) bytes, under 1/10 of the 320 KB.
    ratio = dense["bytes_sent"] / hybrid["bytes_sent"]
    if ratio < 10:
        sys.exit(f"FAIL: the hybrid sent {hybrid['bytes_sent']} bytes, allreduce "
                 f"{dense['bytes_sent']}: only {ratio:.1f}x fewer")
    print(f"ok: hybrid = allreduce (loss {hybrid['test_loss']:.5f} vs {dense['test_loss']:.5f}, "
          f"accuracy {hybrid['test_accuracy']:.3f}) with {ratio:.1f}x fewer bytes")


def resume(distml, d, cfg, engine):
    resumed = check_resume(distml, ["--config", cfg, "--engine", engine, "--np", "2", "--json"],
                           f"{d}/ckpt")
    print(f"ok: the hybrid resumes exactly over {engine} ({resumed['param_checksum']})")


def bad_config(distml, d, cfg):
    cases = [(["--set", "optim.momentum=0.9"], "optim.momentum"),
             (["--set", "optim.name=adam"], "optim.name"),
             (["--set", "model.name=mlp", "--set", f"model.layers=[{LENGTH}, {CLASSES}]"],
              "this model has none")]
    for sets, want in cases:
        p = run(distml, "--config", cfg, "--engine", "local", "--np", "2", *sets, expect_rc=2)
        if want not in p.stderr:
            sys.exit(f"FAIL: {sets}: the error does not name {want!r}:\n{p.stderr[-2000:]}")
        print(f"ok: {' '.join(sets)}: exit 2 naming {want!r}")


def main():
    distml, scenario, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory() as d:
        make_data(f"{d}/text.npz")
        cfg = write_config(d)
        {"equal": equal, "resume": resume, "bad-config": bad_config}[scenario](distml, d, cfg,
                                                                            *args)


if __name__ == "__main__":
    main()
