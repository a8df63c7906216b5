"""The fast kernels' whole-tile loads (FF_WHOLE, set where config.tiles_are_whole holds: no
bounds checks) give the bits of their checked loads, with causal masking aligned bottom-right,
windows, GQA, dropout and every tile family; the rule itself is tested in test_params.py."""

from __future__ import annotations

import pytest

from py_harness.config import AttentionConfig
from tests.native_child import child_report

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


async def _whole_report(impl: str) -> list[dict[str, bool]]:
    """Per config: whether its tile passes set FF_WHOLE (and the forward's pipeline was made
    with it), and whether every output has the same bits as with the module's default
    (checked loads). In a child process of the
    runtime's environment (Dawn's driver is chosen before it loads)."""
    import numpy as np

    from py_harness import runner
    from py_harness.gpu import native
    from py_harness.host.paths import shader_sources
    from py_harness.kernels import variant
    from py_harness.variant import Kernel

    dev = await native.request_device(implementation=impl)
    run = runner.AttentionRunner(dev, shader_sources(), variant("fast"))
    report = []
    for cfg in CONFIGS:
        rng = np.random.default_rng(1)
        x = {
            n: rng.standard_normal(cfg.q_elems() if n in ("q", "d_out") else cfg.kv_elems())
            .astype("<f4")
            .tobytes()
            for n in ("q", "k", "v", "d_out")
        }
        chosen = run.variant.for_head_dim(cfg.head_dim, dev.limits)
        whole = (await run.run(cfg, x)).outputs
        constants = Kernel.constants
        Kernel.constants = lambda self, cfg: {}  # type: ignore[method-assign]
        try:
            checked = (await run.run(cfg, x)).outputs
        finally:
            Kernel.constants = constants  # type: ignore[method-assign]
        # the whole run's pipelines were made with the constant set (the cache's key)
        set_on = {key[1] for key in dev._pipelines if key[3] == (("FF_WHOLE", 1.0),)}
        report.append(
            {
                "whole": chosen.forward.constants(cfg) == {"FF_WHOLE": 1.0}
                and chosen.forward.entry_point in set_on,
                "same bits": {n: bytes(v) for n, v in whole.items()}
                == {n: bytes(v) for n, v in checked.items()},
            }
        )
    dev.destroy()
    return report


@pytest.mark.parametrize("impl", ["wgpu", "dawn"])
def test_whole_tile_loads_give_the_bits_of_checked_ones(impl: str) -> None:
    report = child_report(impl, "tests.test_whole_tiles", "_whole_report", timeout=600)
    assert report == [{"whole": True, "same bits": True}] * len(CONFIGS), report
