"""scripts/int8_mma_probe.py (docs/records/gpu.md quotes it): its float32 GEMM emulated on
int8 products is as exact as it claims, in its NumPy model and in its slicing and combining
kernels on this adapter, and the check fails a slip planted in them; without the feature
it says so and exits. The int8 products themselves need a GPU with Dawn's subgroup
matrices: the probe checks them there against NumPy's exact product before timing them."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from py_harness.host.runtimes.registry import dawn_environment
from py_harness.timing import run_kernel
from tests.fakes import own_thread, script_module
from tests.native_child import ROOT


def _error(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """max |C - A B^T| / max |A B^T|, the product in float64."""
    want = a.astype(np.float64) @ b.astype(np.float64).T
    return float(np.max(np.abs(c - want)) / np.max(np.abs(want)))


def _operands(size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    # rows of different scales (powers of two apart and not): each row has its own exponent
    scale = np.exp2(rng.integers(-20, 20, (size, 1))) * rng.uniform(0.5, 2, (size, 1))
    a = (rng.standard_normal((size, size)) * scale).astype(np.float32)
    return a, rng.standard_normal((size, size), dtype=np.float32)


def test_four_slices_are_as_exact_as_float32_and_three_are_not() -> None:
    probe = script_module("int8_mma_probe")
    a, b = _operands(256)
    f32 = _error(a @ b.T, a, b)
    errors = {s: _error(probe.ozaki_numpy(a, b, s), a, b) for s in (3, 4)}
    assert errors[4] < f32 < errors[3], (f32, errors)


@pytest.mark.needs_runtime("wgpu")
def test_slicing_and_combining_kernels_match_the_model_and_a_slip_fails() -> None:
    from py_harness.host.gpu.native import request_device

    probe = script_module("int8_mma_probe")
    slices, size = 4, 128
    a, b = _operands(size)
    # the second slice's bits taken from one place too high
    slip = probe.SLICE_WGSL.replace("* 128.0;", "* 64.0;")
    assert slip != probe.SLICE_WGSL

    async def emulated(slice_code: str) -> np.ndarray:
        dev = await request_device()
        cut = {}
        for name, x in (("a", a), ("b", b)):
            (q, e), _ = await run_kernel(
                dev,
                slice_code,
                [x.tobytes(), probe.dims(size, size, slices)],
                [slices * size * size, 4 * size],
                ((size + 63) // 64, 1, 1),
                0,
            )
            cut[name] = np.frombuffer(q, np.int8).reshape(slices, size, size).astype(np.int64), e
        # the int8 products as the subgroup matrices would give them, exactly
        qa, qb = cut["a"][0], cut["b"][0]
        acc = np.stack(
            [sum(qa[i] @ qb[t - i].T for i in range(t + 1)) for t in range(slices)]
        ).astype(np.int32)
        (c,), _ = await run_kernel(
            dev,
            probe.COMBINE_WGSL,
            [acc.tobytes(), cut["a"][1], cut["b"][1], probe.dims(size, size, slices)],
            [4 * size * size],
            (size * size // 256, 1, 1),
            0,
        )
        return np.frombuffer(c, np.float32).reshape(size, size)

    good = _error(own_thread(asyncio.run, emulated(probe.SLICE_WGSL)), a, b)
    bad = _error(own_thread(asyncio.run, emulated(slip)), a, b)
    f32 = _error(a @ b.T, a, b)
    assert good < f32 < bad, (good, f32, bad)


@pytest.mark.needs_runtime("dawn")
def test_without_the_feature_it_says_which_and_exits() -> None:
    # Dawn here runs on SwiftShader, which has no subgroup matrices
    run = subprocess.run(
        [sys.executable, "scripts/int8_mma_probe.py", "--pipe-only"],
        capture_output=True,
        text=True,
        env=dawn_environment(),
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode != 0
    assert "no chromium-experimental-subgroup-matrix" in run.stderr, run.stderr[-2000:]
