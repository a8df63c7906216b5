"""Time the fast backward with its key tiles split into a forced number of parts.

    python3 benchmarks/kv_parts_sweep.py --parts 1,2,3 [--rounds 2] -- BENCH ARGS...

For each round and each P in --parts (in that order), one child process replaces
`Variant.kv_parts` by P for every variant whose backward splits key tiles (the fast one),
whatever the rule would choose, then runs `python -m py_harness bench` with the arguments
after `--` (e.g. `--runtime wgpu --variant fast --seq 32768 --head-dim 128 --causal both --runs 2
--warmup 1 --no-torch --plot= --numpy-max-seq 0`), and prints bench's rows and per-pass
lines, each prefixed with P, or the child's error where it failed. This is how
`Variant.kv_parts`'s rule (the count nearest 256 workgroups) was chosen (docs/records/gpu.md)."""

from __future__ import annotations

import argparse
import subprocess
import sys

# The child: the rule replaced before bench imports anything that asks it.
CHILD = """
import sys
from py_harness import variant
forced = int(sys.argv[1])
rule = variant.Variant.kv_parts
def kv_parts(self, cfg, cap_bytes, band_rows=0):
    splits = any(k.key_parts for k in self.backward)
    return forced if splits else rule(self, cfg, cap_bytes, band_rows)
variant.Variant.kv_parts = kv_parts
from py_harness.host.tools.bench import main
sys.exit(main(sys.argv[2:]))
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    own, bench = (
        (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
    )
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", required=True, help="comma-separated part counts, e.g. 1,2,3")
    ap.add_argument("--rounds", type=int, default=1, help="times through the list")
    opts = ap.parse_args(own)
    counts = [int(p) for p in opts.parts.split(",")]
    if any(p < 1 for p in counts):
        ap.error(f"--parts: every count must be >= 1, got {opts.parts}")
    for _ in range(opts.rounds):
        for p in counts:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(p), *bench], capture_output=True, text=True
            )
            for line in proc.stdout.splitlines():
                if line.startswith(("fast", "seed", "#   fa2")):
                    print(f"P={p} {line}", flush=True)
            if proc.returncode:
                print(f"P={p} failed (rc {proc.returncode}): {proc.stderr[-2000:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
