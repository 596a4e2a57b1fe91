#!/usr/bin/env bash
# Exports a known dict of tensors with the fixture and checks that Python's torch.load reads the
# same keys, dtypes and exact values. Fails, never skips, when python3 or torch is missing:
# setup.sh installs python3-torch. Usage: torch_load_export.sh FIXTURE
set -euo pipefail
fixture=$1
python=/usr/bin/python3
[[ -x $python ]] || { echo "FAIL: $python is missing; scripts/setup.sh installs it" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$fixture" "$dir/weights.pt"

"$python" - "$dir/weights.pt" <<'EOF'
import sys

try:
    import torch
except ImportError as e:
    sys.exit(f"FAIL: cannot import torch ({e}); scripts/setup.sh installs python3-torch")

loaded = torch.load(sys.argv[1])
want = {
    "fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
    "fc.bias": torch.tensor([1.5, -2.0], dtype=torch.float32),
    "steps": torch.tensor([7], dtype=torch.int64),
}
problems = []
if not isinstance(loaded, dict):
    problems.append(f"torch.load returned {type(loaded).__name__}, not dict")
elif list(loaded) != list(want):
    problems.append(f"keys {list(loaded)}, want {list(want)}")
else:
    for name, expected in want.items():
        got = loaded[name]
        if not isinstance(got, torch.Tensor):
            problems.append(f"{name}: {type(got).__name__}, not a tensor")
        elif got.dtype != expected.dtype:
            problems.append(f"{name}: dtype {got.dtype}, want {expected.dtype}")
        elif got.shape != expected.shape or not torch.equal(got, expected):
            problems.append(f"{name}: {got.tolist()}, want {expected.tolist()}")
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
print("ok: torch.load read", ", ".join(f"{k} {v.dtype}" for k, v in loaded.items()))
EOF
