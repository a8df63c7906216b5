"""The fast kernels' alternative forms give the same bits: whole-tile loads (FF_WHOLE, set
where config.tiles_are_whole holds: no bounds checks) against their checked loads, and on
the CPU drivers the GEMMs' inner loops kept as loops (FF_ROLLED, Kernel.rolled_loops)
against the written-out steps GPUs run, with causal masking aligned bottom-right, windows,
GQA, dropout and every tile family, through naga and Tint; the whole-tile rule itself is
tested in test_params.py."""

from __future__ import annotations

from typing import Any

import pytest

from py_harness.config import AttentionConfig
from py_harness.kernels import ROLLED, WHOLE
from tests.native_child import NATIVE, child_report

# Whole tiles of 64 with what moves the tiles a pass walks, in each tile family.
CONFIGS = [
    AttentionConfig(2, 4, 128, 192, 64, causal=True, causal_offset=64, dropout_p=0.1, seed=3),
    AttentionConfig(1, 4, 128, 128, 64, window_left=64, window_right=0, softcap=5.0),
    AttentionConfig(
        1, 4, 192, 128, 128, num_kv_heads=1, window_left=128, window_right=64, causal_offset=-64
    ),
    AttentionConfig(1, 8, 512, 64, 64, num_kv_heads=2),
    # head_dim 256: two halves of one workgroup (lavapipe), column blocks (SwiftShader)
    AttentionConfig(1, 2, 128, 128, 256, causal=True),
]


async def _forms_report(impl: str, name: str = "fast") -> list[dict[str, Any]]:
    """Per config: which constants the forward's pipeline was made with, and whether every
    output has the same bits as a run with none set (the module's defaults: checked loads,
    written-out loops). One comparison for both forms keeps the compiles at two sets per
    family, as the whole-tile comparison alone had (SwiftShader compiles slowly): a slip in
    either form changes the bits. In a child process of the runtime's environment (Dawn's
    driver is chosen before it loads)."""
    import numpy as np

    from py_harness import runner
    from py_harness.gpu.device import rolls_loops
    from py_harness.host.gpu import native
    from py_harness.host.paths import shader_sources
    from py_harness.kernels import variant
    from py_harness.variant import Kernel

    dev = await native.request_device(implementation=impl)
    run = runner.AttentionRunner(dev, shader_sources(), variant(name))

    async def outputs(cfg: AttentionConfig, x: dict[str, bytes]) -> dict[str, bytes]:
        return {n: bytes(v) for n, v in (await run.run(cfg, x)).outputs.items()}

    report = []
    for cfg in CONFIGS:
        rng = np.random.default_rng(1)
        x = {
            n: rng.standard_normal(cfg.q_elems() if n in ("q", "d_out") else cfg.kv_elems())
            .astype("<f4")
            .tobytes()
            for n in ("q", "k", "v", "d_out")
        }
        forward = run.variant.for_head_dim(cfg.head_dim, dev.limits).forward
        asked = forward.constants(cfg, rolls_loops(dev.adapter_info))
        chosen = await outputs(cfg, x)
        # the forward's pipeline was made with them (the cache's key)
        made = (forward.entry_point, tuple(sorted(asked.items())))
        constants = Kernel.constants
        Kernel.constants = lambda *_: {}  # type: ignore[method-assign]
        try:
            defaults = await outputs(cfg, x)
        finally:
            Kernel.constants = constants  # type: ignore[method-assign]
        report.append(
            {
                "constants": sorted(asked) if made in dev.compiled() else None,
                "same bits": chosen == defaults,
            }
        )
    dev.destroy()
    return report


async def _forms_report_f16x2(impl: str) -> list[dict[str, Any]]:
    """_forms_report of fast_f16x2 (its packed score GEMMs have forms of their own)."""
    return await _forms_report(impl, "fast_f16x2")


@pytest.mark.parametrize("impl", NATIVE)
@pytest.mark.parametrize("report_of", ["_forms_report", "_forms_report_f16x2"])
def test_whole_tiles_and_rolled_loops_give_the_bits_of_the_default_forms(
    impl: str, report_of: str
) -> None:
    if report_of.endswith("f16x2") and impl != "wgpu":
        pytest.skip("shader-f16: offered here by lavapipe through wgpu alone")
    report = child_report(impl, "tests.test_kernel_forms", report_of, timeout=600)
    # the CPU drivers here (lavapipe through wgpu, SwiftShader through Dawn) run the loops,
    # and the module's defaults the written-out steps GPUs run
    assert report == [{"constants": sorted([WHOLE, ROLLED]), "same bits": True}] * len(CONFIGS), (
        report
    )
