"""`py-harness same-bits`: whether an edit of the built-in kernels changed any output bit:
each case of the matrix run through one session with the .wgsl files of two folders, every
output (O, LSE, dQ, dK, dV) compared bit for bit.

    py-harness same-bits OLD_DIR [NEW_DIR] [--runtime wgpu] [--variant fast]
        [--smoke] [--case ID ...] [--draw 0]

NEW_DIR defaults to shaders/. For an edit meant to change speed only (work moved between
invocations, a pass merged, the same sums in the same order): `check` judges both against
the float64 reference, this says whether anything moved at all, and where. Prints a line
per case: "same", "skipped: <why>" (a feature the variant does not support; long cases
unless named), or the first output that differs with how many elements do, the largest
difference and its index. Exits 1 when any case differs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .. import engine, variants
from ..judge.cases import CASES, SMOKE
from ..judge.inputs import make_inputs
from ..paths import SHADER_DIR, shader_sources
from ..wire import run_on


def difference(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> str | None:
    """None when every output is the same bits; else the first that is not, described."""
    for name, a in old.items():
        b = new[name]
        differs = a.view(np.uint32) != b.view(np.uint32)
        if differs.any():
            gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
            gap[~differs] = 0.0
            gap = np.nan_to_num(gap, nan=np.inf)
            at = np.unravel_index(int(np.argmax(gap)), gap.shape)
            return (
                f"{name}: {int(differs.sum())} of {differs.size} elements differ, most "
                f"{gap[at]:.3g} at {tuple(int(i) for i in at)} ({a[at]:.9g} -> {b[at]:.9g})"
            )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="py-harness same-bits", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("old", type=Path, help="folder with the kernels before the edit")
    parser.add_argument("new", type=Path, nargs="?", default=SHADER_DIR, help="... after it")
    parser.add_argument("--runtime", default="wgpu")
    parser.add_argument("--variant", default="fast", help="a built-in variant")
    parser.add_argument("--smoke", action="store_true", help="the smoke subset only")
    parser.add_argument("--case", action="append", default=[], help="a case id (repeatable)")
    parser.add_argument("--draw", type=int, default=0, help="the input draw")
    args = parser.parse_args(argv)
    for folder in (args.old, args.new):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    cases = SMOKE if args.smoke else CASES
    if args.case:
        known = {c.id: c for c in CASES}
        unknown = [c for c in args.case if c not in known]
        if unknown:
            parser.error(f"--case: unknown {', '.join(unknown)}")
        cases = tuple(known[c] for c in args.case)
    sources = [shader_sources(args.old), shader_sources(args.new)]
    differing = 0
    # engine.open_session, looked up when called: what a test puts there is what runs.
    with engine.open_session(args.runtime) as session:
        for case in cases:
            cfg = case.config()
            why = variants.refusal(args.variant, cfg)
            if why is None and case.long and not args.case:
                why = "a long case (name it with --case)"
            if why is not None:
                print(f"{case.id}: skipped: {why}", flush=True)
                continue
            x = make_inputs(case, args.draw)
            old, new = (
                run_on(session, cfg, x, sources=s, variant=args.variant)["arrays"] for s in sources
            )
            what = difference(old, new)
            differing += what is not None
            print(f"{case.id}: {what or 'same'}", flush=True)
    print(f"{differing} case(s) differ")
    return 1 if differing else 0
