"""`python -m py_harness ablate`: where the fast variant's time goes, by removing one cost
at a time and timing what is left (the results are wrong on purpose; only time counts).

Each ablation is a set of source edits (mutants.Mutant, so a stale anchor fails loudly)
applied to shaders/, written to a scratch folder and timed with `bench --shaders`. The
table gives each pass's GPU time and the saving against the unedited kernels: a cost whose
removal saves little is not what limits the kernel.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from ..arg_types import positive_int, positive_ints
from ..judge.mutants import FAST_COMMON, Mutant
from ..paths import SHADER_DIR, shader_sources
from .bench import main as bench_main


def _edit(name: str, old: str, new: str) -> Mutant:
    return Mutant(name, FAST_COMMON, old, new, variant="fast")


# The loads of whole tiles (FF_WHOLE) and of the others: no load; the values depend on the
# indices, so nothing is folded away.
_LOADS = {
    "fetch-whole": ("let w = ff_vec4_pair(src.buf, i >> 2u, j >> 2u);", "w"),
    "fetch": ("let v = ff_load8(src.buf, i, j);", "v"),
}


def _synthetic(name: str) -> str:
    return (
        f"let {name} = FfPair(vec4<f32>(f32(r.x), f32(c.x), src.mul, 1.0), "
        "vec4<f32>(f32(r.y), f32(c.y), src.mul, 1.0));"
    )


# The anchors below follow the WGSL's layout (4 spaces per level, wrapped argument lists).
_B_OPERAND = (
    "let b = mat4x4<f32>(\n"
    "        ff_smem[j],\n"
    "        ff_smem[j + 16u * FF_AS],\n"
    "        ff_smem[j + 32u * FF_AS],\n"
    "        ff_smem[j + 48u * FF_AS]\n"
    "    );"
)
_V_OPERAND = "o.lo = ff_axpy4(o.lo, w, ff_staged_rows4(j));"  # the low half's
_DOT4 = (
    "return vec4<f32>(\n"
    "        ff_dot(acc.x, a, b[0]),\n"
    "        ff_dot(acc.y, a, b[1]),\n"
    "        ff_dot(acc.z, a, b[2]),\n"
    "        ff_dot(acc.w, a, b[3])\n"
    "    );"
)
_AXPY = (
    "return fma(\n"
    "        vec4<f32>(w.w),\n"
    "        v[3],\n"
    "        fma(vec4<f32>(w.z), v[2], fma(vec4<f32>(w.y), v[1], fma(vec4<f32>(w.x), v[0], acc)))\n"
    "    );"
)
_BARRIER = "\n        workgroupBarrier();"  # the staged steps' barriers, in loop bodies
ABLATIONS: dict[str, tuple[Mutant, ...]] = {
    "baseline": (),
    # every global load of a staged operand (scores and second GEMM)
    "no-global-loads": tuple(
        _edit(name, load, _synthetic(var)) for name, (load, var) in _LOADS.items()
    ),
    # half the shared-memory loads of both GEMMs' inner loops (one operand from registers)
    "half-shared-loads": (
        _edit(
            "scores",
            _B_OPERAND,
            "let b = a + mat4x4<f32>(vec4<f32>(f32(j)), vec4<f32>(), vec4<f32>(), vec4<f32>());",
        ),
        _edit("pv", _V_OPERAND, "o.lo = ff_axpy4(o.lo, w, w);"),
    ),
    # the barriers around each staged step of both GEMMs
    "no-gemm-barriers": tuple(
        _edit(name, f"{line}{_BARRIER}", line)
        for name, line in (
            ("chunk", "ff_stage_chunk(lid, FF_SB, ff_fetch_chunk(lid, b, c0));"),
            ("scores", "s = ff_scores_chunk(s, t);"),
            ("rows", "ff_stage_rows(lid, cur.a);"),
            ("pv", "o = ff_pv_step(t, o, r0, halves);"),
            ("rows2", "ff_stage_rows(lid, cur.b);"),
            ("pv2", "o = ff_pv_step(t, o, r0 + FF_VK, halves);"),
        )
    ),
    # the forward's row max over a score tile through workgroup memory (its barrier and
    # reads): each invocation keeps its own partial max, as no subgroup operation could
    # (a row's 16 invocations span two subgroups of 32): the most subgroups could save
    "no-row-reduction": (
        _edit(
            "row-max",
            "fn ff_row_max(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {\n"
            "    ff_red_put(t, partial);\n"
            "    workgroupBarrier();\n",
            "fn ff_row_max(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {\n"
            "    if (t.x < 99u) { return ff_own4(partial); }\n",
        ),
    ),
    # half the multiply-adds of both GEMMs (same loads)
    "half-fma": (
        _edit(
            "scores",
            _DOT4,
            "return vec4<f32>(ff_dot(acc.x, a, b[0]), ff_dot(acc.y, a, b[1]), "
            "acc.z + b[2].x, acc.w + b[3].y);",
        ),
        _edit(
            "pv",
            _AXPY,
            "return fma(vec4<f32>(w.y), v[1], fma(vec4<f32>(w.x), v[0], acc)) + v[2] + v[3];",
        ),
    ),
}


def ablated_sources(name: str, shaders: Path = SHADER_DIR) -> dict[str, str]:
    sources = shader_sources(shaders)
    for edit in ABLATIONS[name]:
        sources = edit.apply(sources)
    return sources


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m py_harness ablate", description=__doc__)
    ap.add_argument("--seq", type=positive_ints, default=[4096])
    ap.add_argument("--head-dim", type=positive_ints, default=[64])
    ap.add_argument("--heads", type=positive_int, default=16)
    ap.add_argument("--runs", type=positive_int, default=5)
    ap.add_argument(
        "--only", help=f"comma-separated ablations (default: all): {', '.join(ABLATIONS)}"
    )
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(ABLATIONS)
    if unknown := [n for n in names if n not in ABLATIONS]:
        ap.error(f"--only: unknown {', '.join(unknown)}; known: {', '.join(ABLATIONS)}")
    sizes = ["--seq", ",".join(map(str, args.seq)), "--head-dim", ",".join(map(str, args.head_dim))]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            folder = Path(tmp) / name
            folder.mkdir()
            for file, text in ablated_sources(name).items():
                (folder / file).write_text(text)
            out = Path(tmp) / f"{name}.json"
            argv = ["--variant", "fast", "--shaders", str(folder), *sizes]
            argv += ["--heads", str(args.heads), "--causal", "no", "--runs", str(args.runs)]
            argv += ["--warmup", "3", "--no-torch", "--numpy-max-seq", "0"]
            argv += ["--json", str(out), "--plot", ""]
            bench_main(argv)
            rows[name] = [r["extra"]["pass_ms"] for r in json.loads(out.read_text())["rows"]]
    print(f"# ablations, seq {sizes[1]}, head_dim {sizes[3]}: GPU ms per pass (saving)")
    for name, per_size in rows.items():
        for i, passes in enumerate(per_size):
            base = rows["baseline"][i] if "baseline" in rows else passes
            cells = [f"{k} {ms:7.3f} ({1 - ms / base[k]:+.0%})" for k, ms in passes.items()]
            print(f"{name:<18} " + "  ".join(cells))
    return 0
