"""What a failing case leaves for whoever debugs it, under --output (pytest-playwright's
option name; default test-results/): per test a folder with the inputs and the kernel's
outputs as .npz, the verdict, what the runtime printed meanwhile (a page's console, a
worker's stderr), and the one-line command that replays the case alone. Kept for failing
and erroring cases only, unless --artifacts all.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .judge.cases import Case
from .judge.inputs import CaseResult


def folder_for(output: Path, nodeid: str) -> Path:
    """A folder name for a test: its id with every character a path would trip on
    replaced (pytest-playwright's way)."""
    return output / re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-")[:200]


def replay_command(
    case: Case,
    runtime: str,
    variant: str,
    *,
    draw: int = 0,
    shaders: Path | None = None,
    variant_files: Sequence[Path] = (),
) -> str:
    """`py-harness check` for this case alone, on this runtime and variant, judging draws
    0 .. draw (so the failing draw is among them), with the same WGSL and variant files."""
    cmd = ["py-harness", "check", "--runtime", runtime, "--variant", variant, "--case", case.id]
    cmd += ["--draws", str(draw + 1)] if draw else []
    cmd += ["--long"] if case.long else []
    cmd += ["--shaders", str(Path(shaders).resolve())] if shaders else []
    for path in variant_files:
        cmd += ["--variant-file", str(Path(path).resolve())]
    return shlex.join(cmd)


def write(
    folder: Path,
    *,
    inputs: dict[str, np.ndarray],
    result: CaseResult | None,
    verdict: str,
    console: list[str] | None,
    replay: str,
) -> Path:
    """The artifacts of one case run into `folder` (made): inputs.npz, outputs.npz (where
    the run gave outputs; with each output's bound), verdict.txt, console.log (or why there
    is none) and replay.sh. Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "inputs.npz", **inputs)
    if result is not None and result.outputs:
        bounds = {f"bound_{r.name}": np.float64(r.bound) for r in result.reports}
        np.savez(folder / "outputs.npz", **result.outputs, **bounds)
    (folder / "verdict.txt").write_text(verdict.rstrip() + "\n")
    said = "\n".join(console) if console is not None else "(this runtime's output is not captured)"
    (folder / "console.log").write_text(said.rstrip() + "\n")
    # more options for check may follow: replay.sh --out DIR
    (folder / "replay.sh").write_text(f'#!/bin/sh\nexec {replay} "$@"\n')
    (folder / "replay.sh").chmod(0o755)
    return folder
