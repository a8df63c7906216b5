"""Your Python where the kernels run (the plugin's run_in_page): a function's source runs in
the runtime's own Python (the page's Pyodide for chromium and firefox, Node's for node, the
worker's or this process for dawn and wgpu) with the harness's service at hand; its value
comes back. The example runs the forward twice on the same inputs and compares O's bits and
the two runs' times, which the built-in judge does not."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser
CONFIG = {"batch": 1, "num_heads": 2, "num_kv_heads": 2, "seq_q": 40, "seq_k": 70, "head_dim": 16}


async def forward_twice(service, config):
    """In the runtime: one config's forward run twice on the same seeded inputs; whether O
    came back the same bits both times, and each run's timings (ms)."""
    import json
    import math
    import random
    import struct

    from py_harness import base64_tensors
    from py_harness.config import AttentionConfig

    shapes = AttentionConfig.from_dict(config).shapes()
    rng = random.Random(7)
    tensors = {}
    for name in ("q", "k", "v", "d_out"):
        count = math.prod(shapes[name])
        data = struct.pack(f"<{count}f", *(rng.gauss(0.0, 1.0) for _ in range(count)))
        tensors[name] = base64_tensors.encode(data)
    request = json.dumps({"config": config, "tensors": tensors, "backward": False})
    runs = [json.loads(await service.run_case(request)) for _ in range(2)]
    return {
        "same_o": runs[0]["outputs"]["o"] == runs[1]["outputs"]["o"],
        "o_bytes": len(base64_tensors.decode("o", runs[0]["outputs"]["o"])),
        "timings_ms": [r["timings_ms"] for r in runs],
    }


def test_a_function_runs_where_the_kernels_run_and_returns_its_value(run_in_page) -> None:
    got = run_in_page(forward_twice, CONFIG)
    assert got["same_o"], got
    assert got["o_bytes"] == 4 * 1 * 40 * 2 * 16
    assert all(t["service_total_ms"] > 0 for t in got["timings_ms"]), got


def test_its_exceptions_come_back(run_in_page) -> None:
    def refuses(service):
        from py_harness.config import ConfigError

        raise ConfigError("head_dim", "over 256 in this test")

    from py_harness.config import ConfigError

    with pytest.raises(ConfigError, match="head_dim: over 256 in this test"):
        run_in_page(refuses)
