"""Arrays to and from the harness service's JSON (service.py): tensors travel as base64 of
little-endian f32 bytes. run_on sends one case to anything with the service's `call`."""

from __future__ import annotations

import base64
import math
from typing import Any, Protocol

import numpy as np

from ..config import OUTPUTS, AttentionConfig, ConfigError, validate
from ..kernels import DEFAULT_VARIANT
from . import variants


class Caller(Protocol):
    """What run_on needs of a session: the service's entries by name."""

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]: ...


def encode_tensors(x: dict[str, np.ndarray]) -> dict[str, str]:
    """Arrays as the service takes them: base64 of their little-endian f32 bytes."""
    return {
        n: base64.b64encode(np.ascontiguousarray(a, "<f4").tobytes()).decode("ascii")
        for n, a in x.items()
    }


def run_on(
    session: Caller,
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    *,
    sources: dict[str, str] | None = None,
    backward_runs: int = 1,
    variant: str = DEFAULT_VARIANT,
) -> dict[str, Any]:
    """Send one case to a session; returns the decoded outputs as arrays plus metadata."""
    validate(cfg)
    for name, arr in x.items():
        if arr.dtype != np.float32:
            raise ConfigError(name, f"must be float32, got {arr.dtype}")
    request = {
        "config": cfg.to_dict(),
        "tensors": encode_tensors(x),
        "sources": sources if sources is not None else variants.sources(variant),
        "backward_runs": backward_runs,
        "variant": variants.request_form(variant),
    }
    reply = session.call("run_case", request)
    reply["arrays"] = decode_outputs(cfg, reply["outputs"])
    return reply


def decode_outputs(cfg: AttentionConfig, outputs: dict[str, str]) -> dict[str, np.ndarray]:
    """Outputs as run_case returns them (base64 of f32 bytes) as arrays of their shapes
    (cfg.shapes()); a name that is no output, bad base64 or a byte count that is not the
    shape's is refused with the name."""
    shapes = cfg.shapes()
    got = {}
    for name, data in outputs.items():
        if name not in OUTPUTS:
            raise ConfigError(name, f"unknown output (known: {', '.join(OUTPUTS)})")
        try:
            raw = base64.b64decode(data, validate=True)
        except (ValueError, TypeError):
            raise ConfigError(name, "is not base64") from None
        want = math.prod(shapes[name])
        if len(raw) != 4 * want:
            raise ConfigError(name, f"has {len(raw)} bytes; shape wants {want} float32 values")
        got[name] = np.frombuffer(raw, "<f4").reshape(shapes[name])
    return got
