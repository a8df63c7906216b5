"""`python -m py_harness roofline BENCH.json ...`: each pass of a benchmark against the GPU's
roofs.

Reads the JSON that `bench` writes (its per-pass GPU times, `extra.pass_ms`) and prints,
per pass of each variant row: its time, the FLOPs it computes, its rate and share of the
peak, and its arithmetic intensity; `--plot` draws them on a roofline (hand-written SVG).

- FLOPs: Kernel.gemms score-matrix GEMMs per visible (query, key) pair, 2 head_dim FLOPs
  each, over the visible pairs as `bench` counts them (B H Sq Sk, halved when causal).
  A pass that recomputes S counts it again: the rate is of the work the pass does, where
  `bench`'s backward rate is of FlashAttention's 2.5x the forward.
- Bytes: every storage buffer the pass binds, moved once (sizing.buffer_sizes, with the
  partial dQ sums and dK/dV copies the device's limits give, runner.Split, where the JSON
  records them; else one sum, where the variant keeps any, and one copy; the sums not for
  a pass that touches only the scratch's row stats, Kernel.dq_sums):
  the least traffic the pass can have, so the intensity is an upper bound and a pass left
  of the ridge is memory-bound whatever its tiling.
- Roofs: --peak-tflops (the H200's fp32 FMA peak, about 67: 132 SMs x 128 FMA lanes x
  2 FLOPs x 1.98 GHz) and --bandwidth-gbs (the H200's HBM3e, NVIDIA's figure: 4800 GB/s).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ...config import AttentionConfig
from ...kernels import VARIANTS
from ...runner import Split
from ...sizing import buffer_bytes, buffer_sizes
from ...variant import UNIFORM
from .bench_plot import COLORS, fmt_tick, ticks_log

H200_PEAK_TFLOPS = 67.0
H200_BANDWIDTH_GBS = 4800.0


@dataclass(frozen=True)
class PassPoint:
    impl: str
    runtime: str
    seq: int
    head_dim: int
    causal: bool
    name: str  # the entry point
    ms: float
    flops: float  # 0: the pass does no score-matrix GEMMs (Kernel.gemms == 0)
    bytes: int

    @property
    def tflops(self) -> float:
        return self.flops / (self.ms * 1e-3) / 1e12 if self.ms > 0 else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte of the pass's least traffic."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def label(self) -> str:
        return f"D{self.head_dim}{' causal' if self.causal else ''} {self.name}"


def row_config(row: dict, args: dict) -> AttentionConfig:
    """The configuration `bench` timed for a row (args: the JSON's meta.args)."""
    seq_k = args.get("seq_k") or row["seq"]
    return AttentionConfig(
        batch=row["batch"],
        num_heads=row["heads"],
        num_kv_heads=row["kv_heads"],
        seq_q=row["seq"],
        seq_k=seq_k,
        head_dim=row["head_dim"],
        causal=row["causal"],
    )


def pass_points(bench: dict) -> list[PassPoint]:
    """The passes of every variant row of one `bench --json` document that has per-pass
    times (rows of torch and NumPy have none)."""
    meta = bench.get("meta", {})
    args, runtime, limits = meta.get("args", {}), meta.get("runtime", ""), meta.get("limits")
    if args.get("lengths"):
        raise ValueError("roofline: a variable-length bench (--lengths) is not supported")
    points = []
    for row in bench.get("rows", []):
        times = (row.get("extra") or {}).get("pass_ms")
        if not times or row["impl"] not in VARIANTS:
            continue
        cfg = row_config(row, args)
        own = VARIANTS[row["impl"]].for_head_dim(cfg.head_dim, limits)
        split = Split.of(own, cfg, limits) if limits else Split(dq_slots=int(own.partial_dq))
        kernels = {k.entry_point: k for k in (own.forward, *own.backward)}
        # bench's count: 4 B H Sq Sk D for the two GEMMs of the forward, halved for causal
        per_gemm = row["fwd_flops"] / 2
        for name, ms in times.items():
            kernel = kernels.get(name)
            if kernel is None:
                raise ValueError(
                    f"roofline: {row['impl']} has no pass {name!r} at head_dim "
                    f"{cfg.head_dim}; its passes: {', '.join(kernels)}"
                )
            # the uniforms (params, ALiBi slopes, sequence bounds) are read a few words at a time
            roles = [role for role, kind in kernel.bindings.values() if kind != UNIFORM]
            # the scratch's part it touches: the partial sums, per slot or per key tile
            slots, band = (split.dq_slots, split.dq_band_rows) if kernel.dq_sums else (0, 0)
            floats = buffer_sizes(cfg, roles, slots, split.kv_parts, band)
            points.append(
                PassPoint(
                    impl=row["impl"],
                    runtime=runtime,
                    seq=row["seq"],
                    head_dim=cfg.head_dim,
                    causal=cfg.causal,
                    name=name,
                    ms=ms,
                    flops=kernel.gemms * per_gemm,
                    bytes=sum(buffer_bytes(n) for n in floats.values()),
                )
            )
    return points


def ridge(peak_tflops: float, bandwidth_gbs: float) -> float:
    """The intensity (FLOPs per byte) where the bandwidth roof meets the peak."""
    return peak_tflops * 1e12 / (bandwidth_gbs * 1e9)


def format_table(points: list[PassPoint], peak_tflops: float, bandwidth_gbs: float) -> str:
    lines = [
        f"# roofs: {peak_tflops:g} TFLOP/s, {bandwidth_gbs:g} GB/s "
        f"(ridge at {ridge(peak_tflops, bandwidth_gbs):.1f} FLOP/byte)",
        f"{'impl':<6} {'runtime':<7} {'seq':>6} {'D':>4} {'causal':>6} {'pass':<16} {'ms':>9} "
        f"{'TFLOP/s':>8} {'of peak':>7} {'FLOP/B':>8} {'GB/s':>8}",
    ]
    for p in points:
        rate = f"{p.tflops:8.2f} {p.tflops / peak_tflops:7.1%}" if p.flops else f"{'-':>8} {'-':>7}"
        ai = f"{p.intensity:8.1f}" if p.flops else f"{'-':>8}"
        gbs = p.bytes / (p.ms * 1e-3) / 1e9 if p.ms > 0 else 0.0
        lines.append(
            f"{p.impl:<6} {p.runtime:<7} {p.seq:>6} {p.head_dim:>4} "
            f"{'yes' if p.causal else 'no':>6} {p.name:<16} {p.ms:9.3f} {rate} {ai} {gbs:8.1f}"
        )
    return "\n".join(lines)


def write_svg(
    path: Path, points: list[PassPoint], peak_tflops: float, bandwidth_gbs: float, title: str = ""
) -> None:
    """The GEMM passes (flops > 0) as points on log-log axes of intensity and TFLOP/s, under
    the bandwidth roof and the peak."""
    pts = [p for p in points if p.flops > 0 and p.ms > 0]
    if not pts:
        raise ValueError("roofline: no pass with GEMMs and a time to plot")
    width, height, left, right, top, bottom = 760, 520, 70, 200, 50, 50
    knee = ridge(peak_tflops, bandwidth_gbs)
    xlo = math.log10(min(knee / 4, *(p.intensity for p in pts)))
    xhi = math.log10(max(knee * 4, *(p.intensity for p in pts)) * 2)
    ylo = math.log10(min(p.tflops for p in pts) / 2)
    yhi = math.log10(peak_tflops * 2)
    w, h = width - left - right, height - top - bottom

    def px(ai: float) -> float:
        return left + (math.log10(ai) - xlo) / (xhi - xlo) * w

    def py(tf: float) -> float:
        return top + h - (math.log10(tf) - ylo) / (yhi - ylo) * h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">Roofline: each pass'
        f"{escape(' - ' + title) if title else ''}</text>",
        f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#888"/>',
    ]
    for t in ticks_log(10**xlo, 10**xhi):
        out.append(f'<line x1="{px(t)}" y1="{top}" x2="{px(t)}" y2="{top + h}" stroke="#eee"/>')
        out.append(
            f'<text x="{px(t)}" y="{top + h + 16}" text-anchor="middle">{fmt_tick(t)}</text>'
        )
    for t in ticks_log(10**ylo, 10**yhi):
        out.append(f'<line x1="{left}" y1="{py(t)}" x2="{left + w}" y2="{py(t)}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{py(t) + 4}" text-anchor="end">{fmt_tick(t)}</text>')
    out.append(
        f'<text x="{left + w / 2}" y="{height - 12}" text-anchor="middle">'
        "FLOPs per byte of the pass's least traffic (log)</text>"
    )
    out.append(
        f'<text x="16" y="{top + h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + h / 2})">TFLOP/s (log)</text>'
    )
    # the roofs: bandwidth x intensity up to the ridge, then the peak
    x0 = 10**xlo
    roof = [(x0, bandwidth_gbs * 1e9 * x0 / 1e12), (knee, peak_tflops), (10**xhi, peak_tflops)]
    roof = [(a, max(b, 10**ylo)) for a, b in roof]
    line = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in roof)
    out.append(f'<polyline points="{line}" fill="none" stroke="#333" stroke-width="2"/>')
    out.append(
        f'<text x="{px(10**xhi) - 4}" y="{py(peak_tflops) - 6}" text-anchor="end">'
        f"fp32 FMA peak {peak_tflops:g} TFLOP/s</text>"
    )
    names = list(dict.fromkeys(p.name for p in pts))
    colors = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    for p in pts:
        c = colors[p.name]
        x, y = px(p.intensity), py(p.tflops)
        shape = (
            f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" fill="{c}"/>'
            if p.causal
            else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{c}"/>'
        )
        out.append(f"{shape}<title>{escape(p.label)}: {p.tflops:.2f} TFLOP/s</title>")
    for i, n in enumerate(names):
        y = top + 14 + i * 18
        out.append(f'<circle cx="{left + w + 16}" cy="{y - 4}" r="4" fill="{colors[n]}"/>')
        out.append(f'<text x="{left + w + 26}" y="{y}">{escape(n)}</text>')
    y = top + 14 + len(names) * 18 + 10
    out.append(f'<text x="{left + w + 10}" y="{y}">circle: not causal; square: causal</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="py-harness roofline", description=__doc__)
    parser.add_argument("bench_json", nargs="+", type=Path, help="`bench --json` files")
    parser.add_argument("--peak-tflops", type=float, default=H200_PEAK_TFLOPS)
    parser.add_argument("--bandwidth-gbs", type=float, default=H200_BANDWIDTH_GBS)
    parser.add_argument("--plot", type=Path, default=None, help="SVG path")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    if args.peak_tflops <= 0 or args.bandwidth_gbs <= 0:
        parser.error("--peak-tflops and --bandwidth-gbs: must be > 0")
    points: list[PassPoint] = []
    for path in args.bench_json:
        try:
            points += pass_points(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError, KeyError, ValueError) as exc:
            parser.error(f"{path}: {exc}")
    if not points:
        parser.error("no variant row with per-pass times (bench on an adapter with timestamps)")
    print(format_table(points, args.peak_tflops, args.bandwidth_gbs))
    if args.plot:
        write_svg(args.plot, points, args.peak_tflops, args.bandwidth_gbs, args.title)
        print(f"# plot written to {args.plot}")
    return 0
