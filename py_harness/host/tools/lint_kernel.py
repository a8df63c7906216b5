"""`py-harness lint-kernel FILE.toml`: check a variant file without running anything.

Loads it as every tool does (variant_file.load: the TOML against its WGSL, then every case
of its matrix planned against WebGPU's default limits) and says what the harness will do
with it: each pass and its grid, the layouts, the envelope, how many cases its matrix holds
(smoke among them) and how many of the fixed matrix's lie outside the envelope. Exits 1,
with the file:line and what to change, where the file is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..judge import generated
from ..variant_file import VariantFileError, load


def describe(path: Path) -> list[str]:
    """What lint-kernel prints for a file that loads."""
    loaded = load(path)
    v = loaded.variant
    lines = [f"{path}: variant {v.name!r} loads ({v.description or 'no description'})"]
    for label, k in [("forward", p) for p in v.forward_passes] + [
        ("backward", p) for p in v.backward
    ]:
        grid = ", ".join(k.grid) if k.grid else f"rows {k.rows} / heads {k.heads}"
        roles = ", ".join(f"{r}@{n}" for n, (r, _) in sorted(k.bindings.items()))
        lines.append(f"  {label} {k.entry_point}: grid ({grid}); {roles}")
    if v.layouts:
        lines.append(
            "  layouts: " + ", ".join(f"{r} {lay.to_spec()}" for r, lay in v.layouts.items())
        )
    lines.append(f"  outputs judged: {', '.join(v.outputs)} (LSE units: {v.lse})")
    if v.envelope is not None:
        matrix = generated.matrix(v)
        smoke = sum(c.smoke for c in matrix)
        outside = generated.outside(v)
        lines.append(f"  envelope: {v.envelope.to_dict()}")
        lines.append(
            f"  matrix: {len(matrix)} cases inside the envelope ({smoke} smoke); "
            f"{len(outside)} of the fixed matrix's cases lie outside it"
        )
    if loaded.cases:
        lines.append(f"  own cases: {', '.join(c.id for c in loaded.cases)}")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="py-harness lint-kernel", description=__doc__)
    ap.add_argument("toml", nargs="+", type=Path, help="variant files to check")
    args = ap.parse_args(argv)
    status = 0
    for path in args.toml:
        try:
            print("\n".join(describe(path)))
        except VariantFileError as exc:
            print(f"lint-kernel: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
