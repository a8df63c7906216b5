"""What kernels.py declares about the fast variant matches its WGSL (dispatch geometry and
workgroup memory), so a tile-size edit cannot leave the host dispatching the wrong grid."""

from __future__ import annotations

import re

from py_harness.host.sessions import SHADER_DIR
from py_harness.kernels import FAST_ROWS, FAST_WORKGROUP_BYTES, VARIANTS

COMMON = SHADER_DIR / "fa2_fast_common.wgsl"


def _const(src: str, name: str) -> int:
    return int(re.search(rf"const {name}: u32 = (\d+)u;", src).group(1))


def test_fast_rows_and_workgroup_memory_match_the_wgsl() -> None:
    src = COMMON.read_text()
    assert _const(src, "FF_BR") == FAST_ROWS
    (vec4s,) = re.findall(r"var<workgroup> \w+: array<vec4<f32>, (\d+)>", src)
    assert 16 * int(vec4s) == FAST_WORKGROUP_BYTES
    fast = VARIANTS["fast"]
    for v in (fast, *(s for _, s in fast.by_head_dim)):
        tiled = (v.forward, *v.backward[1:])  # backward[0] is the per-row Delta pass
        assert {k.rows_per_workgroup for k in tiled} == {FAST_ROWS}
        assert v.required_limits["maxComputeWorkgroupStorageSize"] == FAST_WORKGROUP_BYTES
