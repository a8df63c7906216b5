"""What `check` reports: one line per result, the case x runtime matrix, cross-runtime
disagreement, and the same results as JSON and JUnit XML for CI systems."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .evaluate import CaseResult
from .limitations import Coverage
from .verdict import OUTPUTS

SHORT = {"o": "O", "lse": "LSE", "dq": "dQ", "dk": "dK", "dv": "dV"}


@dataclass
class Outcome:
    """One case on one runtime, over one or more input draws. status: pass, fail, error,
    known (a failure a declared kernel flaw covers), unsupported (a declared driver
    limitation covers the case: not run) or stale (a declared limitation whose reproducer
    no longer reproduces it: the declaration is out of date, which fails)."""

    case_id: str
    runtime: str
    status: str
    ratio: float  # worst error / bound over O..dV and the draws (inf on error, nan if not run)
    detail: str = ""
    result: CaseResult | None = field(default=None, repr=False)  # draw 0's
    draw_ratios: list[dict[str, float]] = field(default_factory=list)  # each draw's, by output
    failed_draws: int = 0  # draws that failed (a covered kernel flaw's included)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "known", "unsupported")

    def cell(self) -> str:
        draws = len(self.draw_ratios)
        of = f" {self.failed_draws}/{draws}" if draws > 1 and self.failed_draws else ""
        return {
            "pass": "pass" if math.isnan(self.ratio) else f"pass {self.ratio:.2f}",
            "fail": f"FAIL{of} {self.ratio:.3g}",
            "known": f"known{of} {self.ratio:.3g}",
            "unsupported": "unsupported",
            "stale": "STALE",
            "error": "ERROR",
        }[self.status]

    def to_json(self) -> dict[str, Any]:
        d = {"case": self.case_id, "runtime": self.runtime, "status": self.status}
        d["worst_ratio"] = self.ratio if math.isfinite(self.ratio) else None
        d["draws"] = len(self.draw_ratios)
        d["failed_draws"] = self.failed_draws
        d["draw_ratios"] = [
            {n: _finite(r) for n, r in ratios.items()} for ratios in self.draw_ratios
        ]
        if self.detail:
            d["detail"] = self.detail
        if self.result is not None:
            d.update(self.result.to_json())
        return d


def outcome(results: list[CaseResult], covered: Coverage | None) -> Outcome:
    """The outcome of a case's draws (results[0] is draw 0) on one runtime. A kernel flaw
    that covers the case turns its failures into `known`."""
    first = results[0]
    ratios = [{r.name: r.ratio for r in res.reports} for res in results]
    failed = [res for res in results if not res.passed]
    detail = ""
    if not failed:
        status = "pass"
    elif covered is not None:
        status, detail = "known", str(covered)
    else:
        status = "fail"
    if failed and status == "fail":
        worst = max(failed, key=lambda res: max(r.ratio for r in res.reports))
        where = f"draw {worst.draw} of {len(results)}: " if len(results) > 1 else ""
        detail = where + worst.failures()
    worst = max(max(r.values()) for r in ratios)
    return Outcome(first.case_id, first.runtime, status, worst, detail, first, ratios, len(failed))


def _finite(x: float) -> float | None:
    """JSON has no inf or NaN: None stands for them."""
    return x if math.isfinite(x) else None


def format_line(result: CaseResult) -> str:
    """One result: each tensor's max abs error / bound, the worst rel error, GPU ms."""
    cells = []
    for r in result.reports:
        cells.append(f"{SHORT[r.name]} {r.max_abs_err:.1e}/{r.bound:.1e} r{r.max_rel_err:.0e}")
    t = result.timings_ms
    status = "PASS" if result.passed else "FAIL"
    return (
        f"{status} {result.case_id:<38} {' '.join(cells)}  "
        f"fwd {t.get('forward_ms', 0):6.1f} bwd {t.get('backward_ms', 0):6.1f} ms"
    )


def matrix(outcomes: list[Outcome], runtimes: list[str], case_ids: list[str]) -> str:
    """Rows: cases; columns: runtimes; cells: status and worst error / bound."""
    by_key = {(o.case_id, o.runtime): o for o in outcomes}
    width = max(len(c) for c in case_ids)
    lines = [f"{'case':<{width}}  " + "  ".join(f"{r:>14}" for r in runtimes)]
    for case_id in case_ids:
        cells = [by_key[(case_id, r)].cell() if (case_id, r) in by_key else "-" for r in runtimes]
        lines.append(f"{case_id:<{width}}  " + "  ".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def disagreements(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Each case's worst difference between two runtimes' outputs, against the bound of
    the rule (so 1.0 means the runtimes differ by as much as the kernel may err)."""
    by_case: dict[str, list[CaseResult]] = {}
    for o in outcomes:
        if o.result is not None and o.result.outputs:
            by_case.setdefault(o.case_id, []).append(o.result)
    rows = []
    for case_id, results in by_case.items():
        worst: dict[str, Any] | None = None
        for i, a in enumerate(results):
            for b in results[i + 1 :]:
                for name in OUTPUTS:
                    if name == "lse":
                        continue  # empty rows hold a sentinel; O covers the forward
                    diff = np.abs(a.outputs[name].astype(np.float64) - b.outputs[name])
                    bound = next(r.bound for r in a.reports if r.name == name)
                    at = np.unravel_index(int(np.argmax(diff)), diff.shape)
                    row = {
                        "case": case_id,
                        "runtimes": [a.runtime, b.runtime],
                        "tensor": name,
                        "max_abs_diff": float(diff[at]),
                        "at": [int(i) for i in at],
                        "ratio_to_bound": float(diff[at] / bound),
                    }
                    if worst is None or row["ratio_to_bound"] > worst["ratio_to_bound"]:
                        worst = row
        if worst is not None:
            rows.append(worst)
    return rows


def format_disagreements(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        a, b = row["runtimes"]
        lines.append(
            f"{row['case']:<38} {a} vs {b}: {SHORT[row['tensor']]} differs by "
            f"{row['max_abs_diff']:.2e} at {tuple(row['at'])} ({row['ratio_to_bound']:.2f} x bound)"
        )
    return "\n".join(lines)


def write_junit(path: Path, outcomes: list[Outcome], runtimes: list[str]) -> None:
    suites = ET.Element("testsuites", name="py_harness check")
    for runtime in runtimes:
        mine = [o for o in outcomes if o.runtime == runtime]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=runtime,
            tests=str(len(mine)),
            failures=str(sum(o.status in ("fail", "stale") for o in mine)),
            errors=str(sum(o.status == "error" for o in mine)),
            skipped=str(sum(o.status in ("known", "unsupported") for o in mine)),
        )
        for o in mine:
            seconds = 0.0
            if o.result is not None:
                seconds = o.result.timings_ms.get("service_total_ms", 0.0) / 1e3
            case = ET.SubElement(
                suite, "testcase", classname=runtime, name=o.case_id, time=f"{seconds:.3f}"
            )
            if o.status in ("fail", "stale"):
                ET.SubElement(case, "failure", message=o.detail.splitlines()[0]).text = o.detail
            elif o.status == "error":
                ET.SubElement(case, "error", message=o.detail.splitlines()[0]).text = o.detail
            elif o.status in ("known", "unsupported"):
                ET.SubElement(case, "skipped", message=o.detail)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
