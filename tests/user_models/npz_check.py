"""distml's .npz reader against NumPy: every dtype distml takes, several sample shapes, files
from np.savez and np.savez_compressed, read as the row blocks of 1 to 4 ranks.
Usage: npz_check.py NPZ_DUMP"""
import json
import subprocess
import sys
import tempfile

import numpy as np

N = 37  # a prime: every world size leaves a remainder


def block_range(n, parts, i):
    """comm::block_range: the first n % parts blocks get one row more."""
    base, extra = divmod(n, parts)
    begin = i * base + min(i, extra)
    return begin, begin + base + (1 if i < extra else 0)


def main():
    dump = sys.argv[1]
    rng = np.random.default_rng(1)
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        for x_dtype in (np.float32, np.float64, np.uint8):
            for shape in ((N,), (N, 3), (N, 2, 3, 4)):
                x = (rng.standard_normal(shape) * 100).astype(x_dtype)
                for y in (rng.integers(0, 5, N).astype(np.int64),
                          rng.integers(0, 5, N).astype(np.int32),
                          rng.standard_normal(N).astype(np.float32),
                          rng.standard_normal((N, 2)).astype(np.float64)):
                    for save in (np.savez, np.savez_compressed):
                        path = f"{d}/a.npz"
                        save(path, x=x, y=y)
                        for ranks in range(1, 5):
                            parts = []
                            for r in range(ranks):
                                b, e = block_range(N, ranks, r)
                                out = subprocess.run([dump, path, str(b), str(e)],
                                                     capture_output=True, text=True)
                                if out.returncode != 0:
                                    sys.exit(f"FAIL: rows [{b}, {e}): {out.stderr}")
                                parts.append(json.loads(out.stdout))
                            got_x = np.concatenate([np.array(p["x"], np.float32) for p in parts])
                            want_x = x.astype(np.float32).ravel()
                            # float32 and uint8 are exact in float32; float64 is rounded once,
                            # as astype(float32) rounds it: the two must agree bit for bit.
                            if not np.array_equal(got_x, want_x):
                                sys.exit(f"FAIL: x {x_dtype.__name__} {shape} {save.__name__} "
                                         f"at {ranks} ranks")
                            if y.dtype.kind == "i":
                                got_y = np.concatenate([np.array(p["labels"], np.int64)
                                                        for p in parts])
                                want_y = y.astype(np.int64)
                            else:
                                got_y = np.concatenate([np.array(p["targets"], np.float32)
                                                        for p in parts])
                                want_y = y.astype(np.float32).ravel()
                            if not np.array_equal(got_y, want_y):
                                sys.exit(f"FAIL: y {y.dtype} with x {x_dtype.__name__} {shape} "
                                         f"{save.__name__} at {ranks} ranks")
                            sample = list(shape[1:]) or [1]
                            if parts[0]["sample_shape"] != sample or \
                                    parts[0]["target_shape"] != list(y.shape[1:]):
                                sys.exit(f"FAIL: shapes {parts[0]['sample_shape']} "
                                         f"{parts[0]['target_shape']} for {shape} {y.shape}")
                            checked += 1
    print(f"ok: {checked} files x row blocks read as NumPy reads them")


if __name__ == "__main__":
    main()
