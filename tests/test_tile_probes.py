"""scripts/gemm_tile_probe.py and scripts/fwd_tile_probe.py (docs/records/gpu.md quotes
them): their generated kernels compute what they claim on this adapter, for a small and a
large register block, and their checks fail a kernel with a slip planted in it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.fakes import own_thread, script_module

pytestmark = pytest.mark.needs_runtime("wgpu")


@pytest.fixture
def request_wgpu():
    """native.request_device (imported once wgpu is known to run here: needs_runtime)."""
    from py_harness.host.gpu.native import request_device

    return request_device


def test_gemm_probe_kernels_compute_the_product_and_its_check_fails_a_slip(request_wgpu) -> None:
    probe = script_module("gemm_tile_probe")
    small, large = probe.Tiles(4, 4, 64, 64), probe.Tiles(8, 8, 64, 64, form="nn")
    # every chunk staged from the first: the product of the first 32 columns only
    slip = probe.gemm_wgsl(small).replace("k0 / 4u + c]", "c]")
    assert slip != probe.gemm_wgsl(small)

    async def errors() -> list[float]:
        dev = await request_wgpu()
        rng = np.random.default_rng(0)
        return [
            await probe.relative_error(dev, small, 128, rng),
            await probe.relative_error(dev, large, 128, rng),
            await probe.relative_error(dev, small, 128, rng, slip),
        ]

    good_small, good_large, bad = own_thread(asyncio.run, errors())
    assert max(good_small, good_large) < probe.CHECK_BOUND < bad, (good_small, good_large, bad)


def test_forward_probe_matches_numpy_and_its_check_fails_a_slip(request_wgpu) -> None:
    probe = script_module("fwd_tile_probe")
    # Q not scaled: softmax(Q K^T) instead of softmax(Q K^T / 8)
    slip = probe.forward_wgsl(8, 4).replace("* scale;", ";")
    assert slip != probe.forward_wgsl(8, 4)

    async def errors() -> list[float]:
        dev = await request_wgpu()
        rng = np.random.default_rng(0)
        return [
            (await probe.run(dev, 4, 4, 256, 2, 1, rng))[0],
            (await probe.run(dev, 8, 4, 256, 2, 1, rng))[0],
            (await probe.run(dev, 8, 4, 256, 2, 1, rng, slip))[0],
        ]

    good_small, good_large, bad = own_thread(asyncio.run, errors())
    assert max(good_small, good_large) < probe.CHECK_BOUND < bad, (good_small, good_large, bad)
