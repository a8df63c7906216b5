"""What a run reports beyond pass and fail: each case's outcome over its draws, the case x
runtime matrix, and where runtimes disagree (pytest_plugin.py prints them and writes JSON)."""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...config import OUTPUTS
from .inputs import CaseResult
from .limitations import Coverage

SHORT = {"o": "O", "lse": "LSE", "dq": "dQ", "dk": "dK", "dv": "dV"}


def machine_name() -> str:
    """The name results carry for the machine that made them (HARNESS_MACHINE, else the
    host's name): `py-harness merge` tells the same runtime on two machines apart by it."""
    return os.environ.get("HARNESS_MACHINE") or platform.node() or "unnamed"


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


def run_status(passed: bool, covered: Coverage | None) -> str:
    """The one status rule (the plugin, `check`, `explore`, `stability` and `/api/judge`
    share it): a run a declared driver limitation covers is `unsupported` whatever it gave
    (it is not run where that is known first); else `pass`, or, for a failure, `known` where
    a declared kernel flaw covers it and `fail` where nothing does."""
    if covered is not None and covered.status == "unsupported":
        return "unsupported"
    if passed:
        return "pass"
    return "known" if covered is not None else "fail"


def outcome(results: list[CaseResult], covered: Coverage | None) -> Outcome:
    """The outcome of a case's draws (results[0] is draw 0) on one runtime, by `run_status`."""
    first = results[0]
    ratios = [{r.name: r.ratio for r in res.reports} for res in results]
    failed = [res for res in results if not res.passed]
    state = run_status(not failed, covered)
    detail = str(covered) if state in ("known", "unsupported") else ""
    if state == "fail":
        worst = max(failed, key=lambda res: max(r.ratio for r in res.reports))
        where = f"draw {worst.draw} of {len(results)}: " if len(results) > 1 else ""
        detail = where + worst.failures()
    worst = max(max(r.values()) for r in ratios)
    return Outcome(first.case_id, first.runtime, state, worst, detail, first, ratios, len(failed))


def _finite(x: float) -> float | None:
    """JSON has no inf or NaN: None stands for them."""
    return x if math.isfinite(x) else None


def cell(row: dict[str, Any]) -> str:
    """A matrix cell for an outcome's JSON (Outcome.to_json)."""
    ratio = row.get("worst_ratio")
    draws, failed = row.get("draws", 0), row.get("failed_draws", 0)
    of = f" {failed}/{draws}" if draws > 1 and failed else ""
    return {
        "pass": "pass" if ratio is None else f"pass {ratio:.2f}",
        "fail": f"FAIL{of} {ratio if ratio is not None else math.inf:.3g}",
        "known": f"known{of} {ratio if ratio is not None else math.inf:.3g}",
        "unsupported": "unsupported",
        "stale": "STALE",
        "error": "ERROR",
    }[row["status"]]


def matrix(rows: list[dict[str, Any]], runtimes: list[str], case_ids: list[str]) -> str:
    """Rows: cases; columns: runtimes; cells: status and worst error / bound."""
    by_key = {(r["case"], r["runtime"]): r for r in rows}
    width = max((len(c) for c in case_ids), default=4)
    lines = [f"{'case':<{width}}  " + "  ".join(f"{r:>14}" for r in runtimes)]
    for case_id in case_ids:
        cells = [cell(by_key[(case_id, r)]) if (case_id, r) in by_key else "-" for r in runtimes]
        lines.append(f"{case_id:<{width}}  " + "  ".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def save_outputs(result: CaseResult, folder: Path, variant: str) -> Path:
    """A result's outputs and bounds as .npz, for disagreements() after the run (pytest-xdist
    runs runtimes in different processes)."""
    path = folder / f"{variant}--{result.case_id}--{result.runtime}.npz"
    bounds = {f"bound_{r.name}": np.float64(r.bound) for r in result.reports}
    np.savez(path, **result.outputs, **bounds)
    return path


def _compared(a: Any, b: Any) -> tuple[bool, dict[str, Any] | None]:
    """Two runs' outputs (save_outputs' files, loaded): whether every output both hold is
    the same bits, and the output whose largest difference is the largest fraction of the
    rule's bound (None where they share none)."""
    same, worst = True, None
    for name in OUTPUTS:
        if name not in a.files or name not in b.files:
            continue
        x, y = a[name], b[name]
        same = same and x.shape == y.shape and x.tobytes() == y.tobytes()
        if name == "lse" or x.shape != y.shape:
            continue  # empty rows hold a sentinel in LSE; O covers the forward
        diff = np.abs(x.astype(np.float64) - y)
        at = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
        top = float(diff[at]) if diff.size else 0.0
        row = {
            "tensor": name,
            "max_abs_diff": top,
            "at": [int(i) for i in at],
            "ratio_to_bound": top / float(a[f"bound_{name}"]),
        }
        if worst is None or row["ratio_to_bound"] > worst["ratio_to_bound"]:
            worst = row
    return same, worst


def _runs(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """(variant, case) -> [(runtime, its outputs)] for the rows whose outputs were saved."""
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for row in rows:
        if row.get("outputs_file"):
            key = (row.get("variant", ""), row["case"])
            groups.setdefault(key, []).append((row["runtime"], np.load(row["outputs_file"])))
    return groups


def disagreements(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each (variant, case)'s worst difference between two runtimes' outputs (the files that
    rows name in "outputs_file", save_outputs), against the bound of the rule: 1.0 means
    the runtimes differ by as much as the kernel may err."""
    found = []
    for (variant, case_id), runs in _runs(rows).items():
        worst: dict[str, Any] | None = None
        for i, (rt_a, a) in enumerate(runs):
            for rt_b, b in runs[i + 1 :]:
                _, diff = _compared(a, b)
                if diff is not None and (
                    worst is None or diff["ratio_to_bound"] > worst["ratio_to_bound"]
                ):
                    worst = {"variant": variant, "case": case_id, "runtimes": [rt_a, rt_b], **diff}
        if worst is not None:
            found.append(worst)
    return found


def pairwise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each pair of runtimes (implementations; on several machines, runtime@machine),
    over the cases both ran with saved outputs: how many were compared, how many gave the
    same bits, and the largest difference as a fraction of the rule's bound, with where."""
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for (variant, case_id), runs in _runs(rows).items():
        for i, (rt_a, a) in enumerate(runs):
            for rt_b, b in runs[i + 1 :]:
                key = (rt_a, rt_b) if rt_a <= rt_b else (rt_b, rt_a)
                pair = pairs.setdefault(
                    key, {"runtimes": list(key), "cases": 0, "same_bits": 0, "worst": None}
                )
                same, diff = _compared(a, b)
                pair["cases"] += 1
                pair["same_bits"] += same
                if diff is not None and (
                    pair["worst"] is None
                    or diff["ratio_to_bound"] > pair["worst"]["ratio_to_bound"]
                ):
                    pair["worst"] = {"variant": variant, "case": case_id, **diff}
    return [pairs[k] for k in sorted(pairs)]


def format_pairwise(pairs: list[dict[str, Any]]) -> str:
    """One line per pair: same bits on how many cases, else the worst difference / bound."""
    width = max((len(" vs ".join(p["runtimes"])) for p in pairs), default=4)
    lines = []
    for p in pairs:
        head = f"{' vs '.join(p['runtimes']):<{width}}  {p['same_bits']}/{p['cases']} same bits"
        w = p["worst"]
        if w is not None and p["same_bits"] < p["cases"]:
            head += (
                f"; worst {SHORT[w['tensor']]} of {w['case']} ({w['variant']}): "
                f"{w['ratio_to_bound']:.3g} x bound"
            )
        lines.append(head)
    return "\n".join(lines)


def format_disagreements(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        a, b = row["runtimes"]
        lines.append(
            f"{row['case']:<38} {a} vs {b}: {SHORT[row['tensor']]} differs by "
            f"{row['max_abs_diff']:.2e} at {tuple(row['at'])} ({row['ratio_to_bound']:.2f} x bound)"
        )
    return "\n".join(lines)
