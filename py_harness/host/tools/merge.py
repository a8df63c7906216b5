"""`py-harness merge A/results.json B/results.json ...`: results of `check` from any runtimes
and machines (a GPU box, this CPU machine, a browser farm behind --browser-ws) joined into
one report: the case x implementation matrix, where each case's implementations disagree
most, and each pair of implementations over every case both ran: how many gave the same
bits, and the largest difference as a fraction of the rule's bound.

An implementation is a runtime on a machine (`wgpu@gpu-box`): the results name their
machine (HARNESS_MACHINE, else the host's name), and their outputs lie beside them
(`outputs/`, written by `check`), so a results folder can be copied from another machine.
Writes --json and --html where asked; exits 1 when a results file cannot be read.
"""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path
from typing import Any

from ..judge import report
from ..paths import cannot_write_file


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="py-harness merge", description=__doc__)
    ap.add_argument("results", nargs="+", type=Path, help="results.json files of `check`")
    ap.add_argument("--json", type=Path, help="write the merged report here")
    ap.add_argument("--html", type=Path, help="write a one-page HTML summary here")
    return ap


def load(path: Path) -> list[dict[str, Any]]:
    """A results file's rows, each runtime named runtime@machine and its outputs' path made
    absolute (they are written relative to the file). ValueError names what is wrong."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read results ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError(f"{path}: not a results file of `py-harness check` (no results list)")
    machine = doc.get("machine") or path.parent.name
    rows = []
    for row in doc["results"]:
        row = {**row, "runtime": f"{row['runtime']}@{machine}"}
        saved = row.get("outputs_file")
        if saved:
            full = (path.parent / saved).resolve()
            row["outputs_file"] = str(full) if full.is_file() else ""
        rows.append(row)
    return rows


def merge(paths: list[Path]) -> dict[str, Any]:
    """The merged report of results files (load): rows, the implementations in the order
    the files name them, per case the worst disagreement, and every pair's comparison."""
    rows = [row for path in paths for row in load(path)]
    implementations = list(dict.fromkeys(r["runtime"] for r in rows))
    return {
        "implementations": implementations,
        "results": rows,
        "disagreements": report.disagreements(rows),
        "pairs": report.pairwise(rows),
    }


def text(merged: dict[str, Any]) -> str:
    out = []
    rows, impls = merged["results"], merged["implementations"]
    for variant in dict.fromkeys(r.get("variant", "") for r in rows):
        mine = [r for r in rows if r.get("variant", "") == variant]
        out.append(f"== {variant}: case x implementation (error / bound)")
        out.append(report.matrix(mine, impls, list(dict.fromkeys(r["case"] for r in mine))))
    out.append("== pairs of implementations over the cases both ran (outputs compared)")
    out.append(report.format_pairwise(merged["pairs"]) or "(no two implementations share a case)")
    worst = sorted(merged["disagreements"], key=lambda d: -d["ratio_to_bound"])[:20]
    if worst:
        out.append("== where implementations disagree most, per case (difference / bound)")
        out.append(report.format_disagreements(worst))
    return "\n".join(out)


def page(merged: dict[str, Any]) -> str:
    """A compact HTML summary: the pairs table, then the matrix per variant."""
    e = html.escape
    impls = merged["implementations"]
    parts = [
        "<!doctype html><meta charset=utf-8><title>py-harness merge</title>",
        "<style>body{font:13px sans-serif}td,th{padding:2px 6px;border:1px solid #ccc}"
        "table{border-collapse:collapse;margin:8px 0}.fail{background:#fcc}"
        ".same{background:#cfc}</style>",
        "<h1>py-harness: merged results</h1><h2>Pairs of implementations</h2><table>",
        "<tr><th>pair</th><th>cases</th><th>same bits</th><th>worst / bound</th><th>at</th></tr>",
    ]
    for p in merged["pairs"]:
        w, same = p["worst"], p["same_bits"] == p["cases"]
        ratio = "" if same or w is None else f"{w['ratio_to_bound']:.3g}"
        at = "" if same or w is None else f"{report.SHORT[w['tensor']]} of {w['case']}"
        parts.append(
            f"<tr class={'same' if same else ''}><td>{e(' vs '.join(p['runtimes']))}</td>"
            f"<td>{p['cases']}</td><td>{p['same_bits']}</td><td>{ratio}</td><td>{e(at)}</td></tr>"
        )
    parts.append("</table>")
    by_key = {(r.get("variant", ""), r["case"], r["runtime"]): r for r in merged["results"]}
    for variant in dict.fromkeys(r.get("variant", "") for r in merged["results"]):
        cases = dict.fromkeys(r["case"] for r in merged["results"] if r.get("variant") == variant)
        parts.append(f"<h2>{e(variant)}</h2><table><tr><th>case</th>")
        parts += [f"<th>{e(i)}</th>" for i in impls] + ["</tr>"]
        for case in cases:
            parts.append(f"<tr><td>{e(case)}</td>")
            for impl in impls:
                row = by_key.get((variant, case, impl))
                label = report.cell(row) if row else "-"
                bad = row is not None and row["status"] in ("fail", "error", "stale")
                parts.append(f"<td class={'fail' if bad else ''}>{e(label)}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    for option in ("json", "html"):
        target = getattr(args, option)
        if target is not None and (why := cannot_write_file(target)):
            ap.error(f"--{option}: {why}")
    try:
        merged = merge(args.results)
    except ValueError as exc:
        print(f"error: {exc}")
        return 1
    print(text(merged))
    if args.json:
        args.json.write_text(json.dumps(merged, indent=1))
    if args.html:
        args.html.write_text(page(merged))
    return 0
