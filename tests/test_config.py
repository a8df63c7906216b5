"""Bad input is refused before any GPU work, with the argument and the limit named."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from py_harness.config import AttentionConfig, ConfigError, any_nonfinite, validate
from py_harness.gpu.device import NoAdapterError
from py_harness.host.gpu import host_memory
from py_harness.host.judge.cases import CASES, CONTROL
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.wire import run_on
from py_harness.kernels import FAST, SEED
from py_harness.reference_cost import check_reference_cost, reference_cost
from py_harness.runner import AttentionRunner
from py_harness.service import HarnessService
from py_harness.sizing import validate_sizes
from tests.fakes import NoGPUWorkDevice, own_thread

BASE = {"batch": 1, "num_heads": 4, "seq_q": 17, "seq_k": 17, "head_dim": 64}


def cfg(**kw: object) -> AttentionConfig:
    return AttentionConfig(**{**BASE, **kw})


@pytest.mark.parametrize(
    ("kw", "argument", "words"),
    [
        ({"head_dim": 0}, "head_dim", "[1, 256]"),
        ({"head_dim": 257}, "head_dim", "[1, 256]"),
        ({"num_heads": 6, "num_kv_heads": 4}, "num_kv_heads", "multiple"),
        ({"num_kv_heads": 8}, "num_kv_heads", "[1, 4]"),
        ({"dropout_p": 1.0}, "dropout_p", "[0, 1)"),
        ({"dropout_p": -0.1}, "dropout_p", "[0, 1)"),
        ({"seq_q": 0}, "seq_q", ">= 1"),
        ({"causal_offset": -(2**28) - 1}, "causal_offset", "[-268435456, 268435456]"),
        ({"window_left": -2}, "window_left", "[-1,"),
        ({"window_right": 2**28 + 1}, "window_right", "268435456]"),
        ({"window": 3, "window_left": 1}, "window", "not both"),
        ({"softcap": -1.0}, "softcap", ">= 0"),
        ({"softcap": float("inf")}, "softcap", "finite"),
        ({"window": -3}, "window", "[0,"),
        ({"seed": 2**32}, "seed", "4294967295"),
        ({"mask_shape": (17, 16)}, "mask", "seq_k dimension is 16"),
        ({"mask_shape": (2, 1, 17, 17)}, "mask", "batch dimension is 2"),
        ({"mask_shape": (1, 1, 1, 1, 17)}, "mask", "1 to 4 dimensions"),
        ({"alibi_shape": (3,)}, "alibi_slopes", "(num_heads,) = [4]"),
        ({"alibi_shape": (2, 4)}, "alibi_slopes", "(batch, num_heads) = [1, 4]"),
        ({"alibi_shape": [4]}, "alibi_slopes", "got [4]"),
        (
            {"batch": 16, "num_heads": 1025, "alibi_shape": (16, 1025)},
            "alibi_slopes",
            "16400 slopes (batch x num_heads), over the 16384",
        ),
        ({"scale": float("nan")}, "scale", "finite"),
        ({"head_dim": 64.0}, "head_dim", "must be an int"),
        ({"batch": 300, "num_heads": 300}, "batch * num_heads", "65535"),
    ],
)
def test_validate_names_argument_and_limit(kw: dict, argument: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(cfg(**kw))
    assert err.value.argument == argument
    text = str(err.value)
    assert text.startswith(f"{argument}: ")
    assert words.replace(">= 1", "[1,") in text


def test_buffers_over_the_device_limit_are_refused() -> None:
    limits = {"maxStorageBufferBindingSize": 1 << 20, "maxBufferSize": 1 << 30}
    big = cfg(seq_q=4096, head_dim=128)  # q: 4096 * 4 * 128 * 4 bytes = 8 MiB
    with pytest.raises(ConfigError, match=r"q / d_out: needs a 8388608-byte buffer.*1048576"):
        validate_sizes(big, limits)
    validate_sizes(cfg(), limits)


@pytest.mark.parametrize(
    ("config", "tensors", "match"),
    [
        (cfg(head_dim=257), {}, "head_dim"),
        (
            cfg(),
            {"q": b"\0" * 12, "k": b"", "v": b""},
            r"q: has 12 bytes; shape wants 4352 float32",
        ),
        (
            cfg(mask_shape=(17, 17)),
            {"q": b"\0" * 17408, "k": b"\0" * 17408, "v": b"\0" * 17408, "d_out": b"\0" * 17408},
            "mask: is missing",
        ),
        (
            cfg(alibi_shape=(4,)),
            {"q": b"\0" * 17408, "k": b"\0" * 17408, "v": b"\0" * 17408, "d_out": b"\0" * 17408},
            "alibi_slopes: is missing",
        ),
        (
            cfg(alibi_shape=(4,)),
            {
                **{n: b"\0" * 17408 for n in ("q", "k", "v", "d_out")},
                "alibi_slopes": b"\0" * 12,
            },
            r"alibi_slopes: has 12 bytes; shape wants 4 float32",
        ),
        (
            cfg(alibi_shape=(4,)),
            {
                **{n: b"\0" * 17408 for n in ("q", "k", "v", "d_out")},
                "alibi_slopes": np.float32([0.1, np.nan, 0.2, 0.3]).tobytes(),
            },
            r"alibi_slopes: holds nan at flat index 1",
        ),
    ],
)
def test_runner_refuses_before_any_gpu_work(config, tensors, match) -> None:
    device = NoGPUWorkDevice()
    variant = FAST if config.alibi_shape else SEED  # the seed refuses ALiBi first
    runner = AttentionRunner(device, {f: "" for f in variant.files}, variant)
    with pytest.raises(ConfigError, match=match):
        own_thread(asyncio.run, runner.run(config, tensors))


@pytest.mark.parametrize(
    "any_nonfinite",
    [any_nonfinite, lambda data: host_memory.nonfinite([data])[0]],
    ids=["bytes", "threaded"],
)
def test_any_nonfinite_agrees_with_isfinite_on_every_exponent_and_place(any_nonfinite) -> None:  # noqa: ANN001
    """Every float32 high half (sign, exponent, mantissa's top bits) with low halves that
    set none, one or all of the rest, alone and between finite neighbours: the byte-flag
    test (and the native backends' threaded min and max) says non-finite exactly where
    NumPy does."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    for low in (0, 1, 0x7FFF, 0xFFFF):
        values = (high | low).view(np.float32)
        assert any_nonfinite(values.tobytes()) == (not np.isfinite(values).all())
        for x in values[~np.isfinite(values)][::997]:  # each one alone among finite ones
            for at in range(3):
                row = np.float32([1.5, -2.0, 3.0e38])
                row[at] = x
                assert any_nonfinite(row.tobytes()), (x, at)
        finite = values[np.isfinite(values)]
        assert not any_nonfinite(finite.tobytes())


def test_non_float32_data_is_refused_on_the_host() -> None:
    x = make_inputs(CONTROL)
    x["k"] = x["k"].astype(np.float64)

    class NoSession:
        runtime = "none"

        def call(self, entry, request):
            raise AssertionError("sent to the page")

    with pytest.raises(ConfigError, match="k: must be float32, got float64"):
        run_on(NoSession(), CONTROL.config(), x)


def test_no_adapter_message_says_how_to_enable_webgpu() -> None:
    text = str(NoAdapterError("navigator.gpu is undefined in this page"))
    assert "--enable-unsafe-webgpu" in text and "dom.webgpu.enabled" in text


LIMITS = {"max_reference_bytes": 512 * 2**20, "max_reference_seconds": 30.0}


def test_reference_cost_follows_the_declared_shape() -> None:
    # A small body can declare a large shape; the cost is the shape's, so it is refused
    # whatever the body holds. Memory: the float64 copies of 200,000 rows x 16 heads x 64.
    wide = AttentionConfig(
        batch=1, num_heads=16, num_kv_heads=16, seq_q=200_000, seq_k=64, head_dim=64
    )
    assert reference_cost(wide).bytes > 2 * 10**9
    with pytest.raises(ConfigError, match=r"case: .* over its limit of 512 MiB and 30 s") as exc:
        check_reference_cost(wide, LIMITS)
    assert "--max-reference-mb" in str(exc.value)
    # Time alone can refuse: Sq = Sk = 8000 at head_dim 256 is judged in blocks of bounded
    # memory, but its products take minutes.
    slow = AttentionConfig(
        batch=1, num_heads=1, num_kv_heads=1, seq_q=8000, seq_k=8000, head_dim=256
    )
    cost = reference_cost(slow)
    assert cost.seconds > 30 and cost.bytes < 512 * 2**20, cost
    with pytest.raises(ConfigError, match="case: "):
        check_reference_cost(slow, LIMITS)
    # The judge's blocks are per thread: more threads, more memory in flight.
    assert reference_cost(slow, workers=16).bytes > cost.bytes
    # Every short case of the matrix fits the default limits (the demo's matrix view).
    for case in CASES:
        if not case.long:
            check_reference_cost(case.config(), LIMITS)


def test_validate_config_refuses_what_the_server_would() -> None:
    service = HarnessService(request_device=None, load_source=None)  # type: ignore[arg-type]
    big = AttentionConfig(
        batch=1, num_heads=1, num_kv_heads=1, seq_q=30000, seq_k=30000, head_dim=1
    )
    request = {"config": big.to_dict()}
    # own_thread: a browser test earlier in this worker leaves Playwright's loop running here
    assert json.loads(own_thread(asyncio.run, service.validate_config(json.dumps(request))))["ok"]
    checked = service.validate_config(json.dumps(request | {"limits": LIMITS}))
    got = json.loads(own_thread(asyncio.run, checked))
    assert got["ok"] is False and got["argument"] == "case"
    with pytest.raises(ConfigError) as exc:
        check_reference_cost(big, LIMITS)
    assert got["message"] == str(exc.value)  # the form's words are the server's
