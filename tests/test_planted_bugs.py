"""The smoke suite must fail on every bug planted in the kernels (py_harness/host/judge/mutants.py).

On each float path (WGSL compiler and driver: runtimes.float_path) the planted bugs run
once, on the selected runtime that has that path and comes first in JUDGE_ORDER (the
cheapest): Chromium, dawn and node all run Tint's code on SwiftShader here, Firefox and wgpu
naga's on lavapipe, and runtimes on one path agree bit for bit, which the first test here
checks on every run rather than assumes. Selecting one runtime alone (`--runtime chromium`)
runs the planted bugs on it.

Which runtime judges depends only on the selected runtimes and on the float paths, never on
which test ran first in which process, so a run under pytest-xdist (`-n 2`) judges on the
same runtimes, and skips the same tests, as a serial run. A test on runtime R needs the float
paths of the runtimes before R that use R's compiler (only they can share its path); each is
found once per test run by opening a session on it, and shared between xdist workers through
a JSON file next to the workers' temporary folders (the folder pytest-xdist's own docs use
for "run once per session" data), under a file lock, so that a runtime is probed once in the
whole run however many workers ask. A serial run uses the same file in its own temporary
folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from py_harness.host.engine import evaluate, evaluate_forward_first, judged_cases
from py_harness.host.judge.cases import SMOKE, by_id
from py_harness.host.judge.mutants import (
    BLOCKS_ONLY,
    FIRST_CATCH,
    MUTANTS,
    PATH_DEPENDENT,
    SPLIT_FAMILY,
    SPLIT_ONLY,
    Mutant,
)
from py_harness.host.paths import shader_sources
from py_harness.host.pytest_plugin import SessionPool, runtime_missing
from py_harness.host.runtimes.registry import float_path, runtime
from py_harness.host.runtimes.sessions import Session
from py_harness.kernels import variant

# Each planted bug's pipelines stay compiled in the session (about a hundred variants of
# the kernels): its sessions are closed after this module, not handed on.
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.harness_private]

# Smoke cases of different kinds: the control, GQA with causal, a key-padding mask,
# dropout.
_SAME_BITS_CASES = [
    by_id(i)
    for i in (
        "d64-sq128-sk128-b2-h4",
        "d59-sq113-sk203-gqa6x2-causal",
        "d64-sq113-sk203-b2-h4-mask-keypad",
        "d64-sq128-sk217-h4-drop0.17",
    )
]

FloatPath = tuple[str, str]

# Which runtime judges a float path when several share it: the native ones first. The same
# WGSL gives the same bits on one path (checked below), and a planted bug costs less
# without a page: each recompiles its pipelines, on SwiftShader 14-19 s through dawn
# against 17-21 s through Chromium (3 bugs measured side by side).
JUDGE_ORDER = ("wgpu", "dawn", "node", "firefox", "chromium")


class FloatPaths:
    """runtime -> its float path (or None: not available, or its session failed), one
    JSON file per test run shared by every process of the run, read and written under a
    file lock. A runtime missing from the file is probed while the lock is held, so a second
    worker that needs it waits for the first one's answer instead of probing it again."""

    def __init__(self, folder: Path, probe: Any) -> None:
        self.file = folder / "planted-bugs-float-paths.json"
        self._lock = folder / "planted-bugs-float-paths.lock"
        self._probe = probe  # (runtime name) -> FloatPath | None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with open(self._lock, "w") as fd:
            fcntl.flock(fd, fcntl.LOCK_EX)
            known = json.loads(self.file.read_text()) if self.file.exists() else {}
            before = dict(known)
            yield known
            if known != before:
                self.file.write_text(json.dumps(known, indent=1))

    def get(self, name: str) -> FloatPath | None:
        with self._locked() as known:
            if name not in known:
                known[name] = self._probe(name)
            return tuple(known[name]) if known[name] else None  # type: ignore[return-value]

    def put(self, name: str, path: FloatPath) -> None:
        """A runtime's path as its own session reports it (saves probing it again)."""
        with self._locked() as known:
            known.setdefault(name, list(path))


@pytest.fixture(scope="session")
def float_paths(
    request: pytest.FixtureRequest,
    harness_pool: SessionPool,
    tmp_path_factory: pytest.TempPathFactory,
) -> FloatPaths:
    # Under xdist each worker's basetemp is <run folder>/popen-gwN: the parent is the run's
    # folder, the same for every worker and new for every run. A serial run's basetemp is
    # itself new for every run.
    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = folder.parent

    def probe(name: str) -> FloatPath | None:
        if runtime_missing(name, request.config):
            return None  # never launched, so never judges
        rt = runtime(name)
        base_url = request.getfixturevalue("harness_server") if rt.needs_server else ""
        try:
            session = harness_pool.take(name, base_url)
        except Exception:  # its own tests report why; it cannot judge in any process
            return None
        try:
            return float_path(session)
        finally:
            harness_pool.give(name, session, keep=True)

    return FloatPaths(folder, probe)


def judging_runtime(harness: Session, paths: FloatPaths, selected: list[str]) -> str:
    """The first of the selected runtimes, in JUDGE_ORDER, whose float path is harness's."""
    mine = float_path(harness)
    paths.put(harness.runtime, mine)
    for name in in_judge_order(selected):
        if name == harness.runtime:
            break
        # Runtimes on another WGSL compiler cannot share the path: no need to probe them.
        if runtime(name).compiler == mine[0] and paths.get(name) == mine:
            return name
    return harness.runtime


def first_float_path(paths: FloatPaths, selected: list[str]) -> str | None:
    """The selected runtime, first in JUDGE_ORDER, that has a float path: it judges every
    planted bug; the other float paths judge the PATH_DEPENDENT ones."""
    return next((n for n in in_judge_order(selected) if paths.get(n)), None)


def in_judge_order(selected: list[str]) -> list[str]:
    """The selected runtimes in JUDGE_ORDER (any it does not name last)."""
    rank = {name: i for i, name in enumerate(JUDGE_ORDER)}
    return sorted(selected, key=lambda n: rank.get(n, len(rank)))


def test_runtimes_on_one_float_path_agree_bit_for_bit(
    request: pytest.FixtureRequest, harness_pool: SessionPool
) -> None:
    outputs: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for name in request.config.harness_runtimes:
        if runtime_missing(name, request.config):
            continue
        rt = runtime(name)
        base_url = request.getfixturevalue("harness_server") if rt.needs_server else ""
        session = harness_pool.take(name, base_url)  # the unmodified kernels only
        try:
            got = {
                (case.id, v): evaluate(case, session, variant=v).outputs
                for case in _SAME_BITS_CASES
                for v in ("seed", "fast")
            }
            outputs.setdefault(float_path(session), []).append((name, got))
        finally:
            harness_pool.give(name, session, keep=True)
    shared = {path: members for path, members in outputs.items() if len(members) > 1}
    if not shared:
        pytest.skip("no two selected runtimes share a float path")
    for path, ((first, ref), *others) in shared.items():
        for name, got in others:
            for key, arrays in ref.items():
                for tensor, a in arrays.items():
                    b = got[key][tensor]
                    assert np.array_equal(a, b, equal_nan=True), (
                        f"{first} and {name} share {path} but {tensor} of {key} differs by "
                        f"up to {np.nanmax(np.abs(a - b)):.3g}: run the planted bugs on both"
                    )


def test_path_dependent_bugs_are_named_and_include_every_precision_bug() -> None:
    names = {m.name for m in MUTANTS}
    assert names >= PATH_DEPENDENT, PATH_DEPENDENT - names
    # every rounding, truncation or approximated exp, by name (-17bits, -16bits, -5digits):
    # their margins over the bound are narrow
    precision = {n for n in names if re.search(r"-\d+(bits|digits)$", n)}
    assert len(precision) >= 20 and precision <= PATH_DEPENDENT, precision - PATH_DEPENDENT
    # code that one form of head_dim 256 never runs is judged on every path, so the path
    # that runs it judges it; no edit is dead in both forms
    assert SPLIT_ONLY | BLOCKS_ONLY <= PATH_DEPENDENT and not SPLIT_ONLY & BLOCKS_ONLY


def test_every_mutant_changes_the_source() -> None:
    sources = shader_sources()
    for mutant in MUTANTS:
        assert mutant.apply(sources) != sources, mutant.name
    # Every mutant has a recorded first catcher, and it is a smoke case.
    assert set(FIRST_CATCH) == {m.name for m in MUTANTS}
    assert set(FIRST_CATCH.values()) <= {c.id for c in SMOKE}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_smoke_suite_catches(
    request: pytest.FixtureRequest, harness: Session, float_paths: FloatPaths, mutant: Mutant
) -> None:
    judged_on = judging_runtime(harness, float_paths, request.config.harness_runtimes)
    if judged_on != harness.runtime:
        compiler, driver = float_path(harness)
        pytest.skip(f"{harness.runtime} runs {compiler} on {driver}, as {judged_on} does")
    first_path = first_float_path(float_paths, request.config.harness_runtimes)
    every_path = request.config.getoption("--planted-bugs-every-path")
    if mutant.name not in PATH_DEPENDENT and first_path != harness.runtime and not every_path:
        pytest.skip(
            f"a logic slip, judged on {first_path}'s float path only (mutants.PATH_DEPENDENT; "
            "--planted-bugs-every-path runs it here too)"
        )
    # A bug planted in the 256 family's halves is dead code where the device runs head_dim
    # 256 in the 128 family's column blocks (mutants.SPLIT_ONLY), and one planted in the
    # blocks' bookkeeping is dead where it runs the halves (mutants.BLOCKS_ONLY).
    own = variant(mutant.variant)
    if mutant.name in SPLIT_ONLY | BLOCKS_ONLY:
        wide = own.for_head_dim(own.max_head_dim, harness.adapter()["limits"])
        halves = SPLIT_FAMILY in wide.forward.files
        if halves != (mutant.name in SPLIT_ONLY):
            form = "two halves of one workgroup" if halves else "column blocks"
            pytest.skip(f"{harness.runtime} runs head_dim 256 in {form}: the edit is dead code")
    sources = mutant.apply(shader_sources())
    caught = []
    first = FIRST_CATCH.get(mutant.name)
    # Only cases where the unmodified kernels get a verdict count: not those a declared
    # driver limitation or kernel flaw covers on this adapter, nor those the variant does
    # not support (the seed skips FlashAttention-2's new axes).
    judged = judged_cases(SMOKE, mutant.variant, harness.adapter_name())
    ordered = sorted(judged, key=lambda c: c.id != first)  # the known catcher first
    for case in ordered:  # stop at the first case that fails: one is enough
        result = evaluate_forward_first(case, harness, sources=sources, variant=mutant.variant)
        if not result.passed:
            caught.append(f"{case.id}: {result.failures().splitlines()[0]}")
            break
    assert caught, f"no smoke case fails with the planted bug {mutant.name}"
