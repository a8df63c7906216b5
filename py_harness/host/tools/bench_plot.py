"""The benchmark's plot as a hand-written SVG (no plotting dependency).

One panel per (head_dim, causal) and pass (forward, backward): time in ms against the
sequence length, both on log scales, one line per implementation.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
PANEL_W, PANEL_H = 380, 250
LEFT, RIGHT, TOP, BOTTOM = 62, 16, 28, 42  # panel margins
HEADER = 56  # title and legend


def ticks_log(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks covering [lo, hi] (lo > 0), thinned to at most ~8."""
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        ticks += [m * 10.0**e for m in (1, 2, 5)]
    ticks = [t for t in ticks if lo <= t <= hi]
    while len(ticks) > 8:
        ticks = ticks[::2]
    return ticks or [lo, hi]


def fmt_tick(v: float) -> str:
    return f"{v:g}" if v >= 0.01 else f"{v:.0e}"


def _panel(
    x0: float,
    y0: float,
    label: str,
    series: dict[str, list[tuple[int, float]]],
    colors: dict[str, str],
) -> list[str]:
    pts = [p for s in series.values() for p in s]
    xs = [math.log2(s) for s, _ in pts]
    ys = [math.log10(ms) for _, ms in pts]
    xlo, xhi = min(xs), max(xs)
    if xhi - xlo < 1e-9:
        xlo, xhi = xlo - 0.5, xhi + 0.5
    ylo, yhi = min(ys) - 0.1, max(ys) + 0.1
    w, h = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM

    def px(seq: float) -> float:
        return x0 + LEFT + (math.log2(seq) - xlo) / (xhi - xlo) * w

    def py(ms: float) -> float:
        return y0 + TOP + h - (math.log10(ms) - ylo) / (yhi - ylo) * h

    out = [
        f'<text x="{x0 + LEFT + w / 2}" y="{y0 + 18}" text-anchor="middle" '
        f'font-weight="bold">{escape(label)}</text>',
        f'<rect x="{x0 + LEFT}" y="{y0 + TOP}" width="{w}" height="{h}" '
        'fill="none" stroke="#888"/>',
    ]
    for seq in sorted({s for s, _ in pts}):
        x = px(seq)
        out.append(f'<line x1="{x}" y1="{y0 + TOP}" x2="{x}" y2="{y0 + TOP + h}" stroke="#eee"/>')
        out.append(f'<text x="{x}" y="{y0 + TOP + h + 16}" text-anchor="middle">{seq}</text>')
    for t in ticks_log(10**ylo, 10**yhi):
        y = py(t)
        out.append(f'<line x1="{x0 + LEFT}" y1="{y}" x2="{x0 + LEFT + w}" y2="{y}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + LEFT - 6}" y="{y + 4}" text-anchor="end">{fmt_tick(t)}</text>')
    out.append(
        f'<text x="{x0 + LEFT + w / 2}" y="{y0 + PANEL_H - 8}" text-anchor="middle">'
        "sequence length</text>"
    )
    out.append(
        f'<text x="{x0 + 14}" y="{y0 + TOP + h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 + 14} {y0 + TOP + h / 2})">ms (log)</text>'
    )
    for impl, s in series.items():
        s = sorted(s)
        line = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in s)
        c = colors[impl]
        out.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        out += [f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3" fill="{c}"/>' for a, b in s]
    return out


def write_svg(path: Path, rows: list[dict], title: str = "") -> None:
    """rows: bench JSON rows (impl, seq, head_dim, causal, fwd_ms, bwd_ms)."""
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(impls)}
    combos = sorted({(r["head_dim"], r["causal"]) for r in rows})
    width, height = 2 * PANEL_W, HEADER + max(1, len(combos)) * PANEL_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="14" font-weight="bold">FlashAttention-2: time against '
        f"sequence length{escape(' - ' + title) if title else ''}</text>",
    ]
    for i, name in enumerate(impls):
        x = 10 + i * 150
        parts.append(f'<rect x="{x}" y="32" width="14" height="4" fill="{colors[name]}"/>')
        parts.append(f'<text x="{x + 20}" y="38">{escape(name)}</text>')
    for ri, (d, causal) in enumerate(combos):
        for ci, (key, what) in enumerate((("fwd_ms", "forward"), ("bwd_ms", "backward"))):
            series: dict[str, list[tuple[int, float]]] = {}
            for r in rows:
                if (r["head_dim"], r["causal"]) == (d, causal) and r.get(key):
                    series.setdefault(r["impl"], []).append((r["seq"], r[key]))
            if series:
                label = f"{what}, D = {d}, {'causal' if causal else 'not causal'}"
                parts += _panel(ci * PANEL_W, HEADER + ri * PANEL_H, label, series, colors)
    parts.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
