"""`python -m py_harness stability`: are the verdicts a property of the kernel?

Runs `check` over N input draws on several WebGPU implementations and driver code paths
(each in a process of its own, since a Vulkan driver is chosen when a process starts) and
tabulates, per case, variant and profile, how many draws failed. A correct kernel must pass
every draw everywhere, outside the cases a declared limitation covers: the false-FAIL rate
this prints is the harness's, and its target is 0.

Profiles (PROFILES): Chromium (Dawn/Tint on SwiftShader), Firefox (wgpu/naga on lavapipe),
and wgpu-py (naga) on lavapipe with its default and its 128-bit vector width
(LP_NATIVE_VECTOR_WIDTH, another LLVM code path) and on SwiftShader's Vulkan driver.
Results: build/stability/PROFILE-VARIANT/results.json and build/stability/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...kernels import VARIANTS
from .. import variants as variant_registry
from ..arg_types import positive_int
from ..judge.cases import by_id
from ..paths import PACKAGE_DIR, cannot_write, output_dir

SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"


@dataclass(frozen=True)
class Profile:
    name: str
    runtime: str
    env: dict[str, str]
    about: str


PROFILES: tuple[Profile, ...] = (
    Profile("chromium", "chromium", {}, "Dawn/Tint on SwiftShader (Subzero JIT)"),
    Profile("firefox", "firefox", {}, "wgpu/naga in Firefox on lavapipe"),
    Profile("wgpu-lavapipe", "wgpu", {}, "naga on lavapipe, its default vector width"),
    # Mesa 22.3's shader cache keys ignore the vector width: a cache of its own, so that
    # neither width runs code the other compiled.
    Profile(
        "wgpu-lavapipe-128",
        "wgpu",
        {"LP_NATIVE_VECTOR_WIDTH": "128", "MESA_SHADER_CACHE_DIR": "{out}/mesa-cache-128bit"},
        "naga on lavapipe with 128-bit vectors (another LLVM code path)",
    ),
    Profile(
        "wgpu-swiftshader",
        "wgpu",
        {"VK_ICD_FILENAMES": SWIFTSHADER_ICD},
        "naga on SwiftShader's Vulkan driver",
    ),
)


def run_profile(profile: Profile, variant: str, args: argparse.Namespace) -> dict:
    out = args.out / f"{profile.name}-{variant}"
    cmd = [sys.executable, "-m", "py_harness", "check", "--runtime", profile.runtime]
    cmd += ["--variant", variant, "--draws", str(args.draws), "--out", str(out)]
    cmd += ["--smoke"] if args.smoke else []
    cmd += ["--long"] if args.long else []
    for case in args.case:
        cmd += ["--case", case]
    t0 = time.perf_counter()
    log = out.with_suffix(".log")
    out.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        env = {k: v.format(out=args.out) for k, v in profile.env.items()}
        proc = subprocess.run(cmd, cwd=PACKAGE_DIR.parent, env=os.environ | env, stdout=f, stderr=f)
    results = out / "results.json"
    if not results.exists():
        return {"profile": profile.name, "variant": variant, "error": f"no results: see {log}"}
    summary = json.loads(results.read_text())
    summary |= {"profile": profile.name, "variant": variant, "exit": proc.returncode}
    summary["wall_s"] = time.perf_counter() - t0
    return summary


def tally(runs: list[dict]) -> dict:
    """Judged draws, false FAILs (fail or error; known flaws and unsupported cases apart)."""
    judged = failed = known = unsupported = 0
    for run in runs:
        for r in run.get("results", []):
            if r["case"].startswith("limitation:"):
                failed += r["status"] != "pass"  # a stale declaration is a wrong verdict too
                continue
            if r["status"] == "unsupported":
                unsupported += 1
                continue
            draws = max(1, r["draws"])
            judged += draws
            if r["status"] == "known":
                known += r["failed_draws"]
            elif r["status"] in ("fail", "error"):
                failed += r["failed_draws"] or draws
    return {
        "judged_draws": judged,
        "false_fails": failed,
        "known": known,
        "unsupported": unsupported,
    }


def table(runs: list[dict]) -> str:
    """Case x profile-variant: failed draws / draws and the worst ratio."""
    cols = [f"{r['profile']}:{r['variant']}" for r in runs]
    cells: dict[str, dict[str, str]] = {}
    for col, run in zip(cols, runs, strict=True):
        for r in run.get("results", []):
            if r["status"] == "unsupported":
                cell = "unsup"
            elif r["status"] == "stale" or r["case"].startswith("limitation:"):
                cell = "ok" if r["status"] == "pass" else r["status"].upper()
            else:
                worst = r["worst_ratio"]
                ratio = f"{worst:.2f}" if worst is not None else "inf"
                mark = {"pass": "", "known": "k", "fail": "F", "error": "E"}[r["status"]]
                cell = f"{mark}{r['failed_draws']}/{r['draws']} {ratio}"
            cells.setdefault(r["case"], {})[col] = cell
    width = max([len(c) for c in cells] + [4])
    lines = [f"{'case':<{width}}  " + "  ".join(f"{c:>22}" for c in cols)]
    for case, row in cells.items():
        lines.append(f"{case:<{width}}  " + "  ".join(f"{row.get(c, '-'):>22}" for c in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m py_harness stability", description=__doc__)
    ap.add_argument(
        "--draws", type=positive_int, default=20, help="input draws per case (default 20)"
    )
    ap.add_argument("--variant", default=",".join(VARIANTS), help="comma-separated variants")
    names = ", ".join(p.name for p in PROFILES)
    ap.add_argument("--profiles", default="all", help=f"comma-separated: {names} (default all)")
    ap.add_argument("--smoke", action="store_true", help="only the smoke subset")
    ap.add_argument("--long", action="store_true", help="also the long cases")
    ap.add_argument("--case", action="append", default=[], help="a case id (repeatable)")
    ap.add_argument("--out", type=Path, default=output_dir() / "stability")
    args = ap.parse_args(argv)
    wanted = None if args.profiles == "all" else set(args.profiles.split(","))
    profiles = [p for p in PROFILES if wanted is None or p.name in wanted]
    if wanted and wanted - {p.name for p in profiles}:
        ap.error(
            f"--profiles: unknown {sorted(wanted - {p.name for p in profiles})}; known: {names}"
        )
    # Each profile's check would refuse these only after its runtime had started.
    try:
        variants = variant_registry.parse(args.variant, VARIANTS)
    except (KeyError, ValueError) as err:
        ap.error(err.args[0])
    try:
        for case in args.case:
            by_id(case)
    except ValueError as err:
        ap.error(f"--case: {err}")
    if why := cannot_write(args.out):
        ap.error(f"--out: {why}")
    runs = []
    for variant in variants:
        for profile in profiles:
            print(f"# {profile.name} ({profile.about}), {variant}, {args.draws} draws", flush=True)
            run = run_profile(profile, variant, args)
            print(f"#   {run.get('error') or tally([run])}", flush=True)
            runs.append(run)
    print("\n# failed draws / draws and the worst ratio (k: a declared flaw's, F: FAIL)")
    print(table(runs))
    total = tally(runs)
    rate = total["false_fails"] / max(1, total["judged_draws"])
    print(
        f"\n# {total['judged_draws']} judged draws: {total['false_fails']} false FAILs "
        f"({rate:.2%}); {total['known']} failures of a declared kernel flaw; "
        f"{total['unsupported']} case runs unsupported on their driver"
    )
    (args.out / "summary.json").write_text(json.dumps({"total": total, "runs": runs}, indent=1))
    return 1 if total["false_fails"] or any("error" in r for r in runs) else 0
