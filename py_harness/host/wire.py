"""Arrays to and from the harness service's JSON (service.py): tensors travel as base64 of
little-endian f32 bytes. run_on sends one case to anything with the service's `call`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from .. import base64_tensors
from ..config import OUTPUTS, AttentionConfig, ConfigError, validate
from ..kernels import DEFAULT_VARIANT
from . import variants


class Caller(Protocol):
    """What run_on needs of a session: the service's entries by name. A session whose
    takes_blobs is true also has call_blobs(entry, request, blobs) -> (reply, blobs), the
    tensors going as bytes beside the JSON (HarnessService.run_case_blobs)."""

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]: ...


def encode_tensors(x: dict[str, np.ndarray]) -> dict[str, str]:
    """Arrays as the service takes them: base64 of their little-endian f32 bytes."""
    return {
        n: base64_tensors.encode(np.ascontiguousarray(a, "<f4").tobytes()) for n, a in x.items()
    }


def run_on(
    session: Caller,
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    *,
    sources: dict[str, str] | None = None,
    backward: bool = True,
    backward_runs: int = 1,
    variant: str = DEFAULT_VARIANT,
) -> dict[str, Any]:
    """Send one case to a session; returns the decoded outputs as arrays plus metadata.
    backward: False runs the forward alone (outputs o and lse)."""
    validate(cfg)
    for name, arr in x.items():
        if arr.dtype != np.float32:
            raise ConfigError(name, f"must be float32, got {arr.dtype}")
    request = {
        "config": cfg.to_dict(),
        "sources": sources if sources is not None else variants.sources(variant),
        "backward": backward,
        "backward_runs": backward_runs,
        "variant": variants.request_form(variant),
    }
    reply, blobs = call_with_tensors(session, "run_case", request, x)
    outputs = {n: blobs[v] if blobs is not None else v for n, v in reply["outputs"].items()}
    reply["arrays"] = decode_outputs(cfg, outputs)
    return reply


def call_with_tensors(
    session: Caller, entry: str, request: dict[str, Any], x: dict[str, np.ndarray]
) -> tuple[dict[str, Any], list | None]:
    """The entry with `request` and the arrays x as its tensors: as bytes beside the JSON
    where the session takes them (the native sessions), else as base64. Returns the reply
    and the blobs that came back with it (None for base64: its outputs are in the reply)."""
    if getattr(session, "takes_blobs", False):
        request = {**request, "tensors": {n: i for i, n in enumerate(x)}}
        return session.call_blobs(entry, request, tensor_blobs(x.values()))
    return session.call(entry, {**request, "tensors": encode_tensors(x)}), None


def tensor_blobs(arrays: Iterable[np.ndarray]) -> list[memoryview]:
    """Arrays as blobs (Caller.call_blobs): views of their little-endian f32 bytes, as
    bytes (format "B", so that len() counts bytes)."""
    return [memoryview(np.ascontiguousarray(a, "<f4").reshape(-1).view(np.uint8)) for a in arrays]


def decode_outputs(
    cfg: AttentionConfig, outputs: dict[str, str | bytes | memoryview]
) -> dict[str, np.ndarray]:
    """Outputs as run_case returns them (base64 of f32 bytes; from run_case_blobs, the
    bytes) as arrays of their shapes (cfg.shapes()); a name that is no output, bad base64
    or a byte count that is not the shape's is refused with the name."""
    shapes = cfg.shapes()
    got = {}
    for name, data in outputs.items():
        if name not in OUTPUTS:
            raise ConfigError(name, f"unknown output (known: {', '.join(OUTPUTS)})")
        raw = base64_tensors.decode(name, data) if isinstance(data, str) else data
        want = math.prod(shapes[name])
        if len(raw) != 4 * want:
            raise ConfigError(name, f"has {len(raw)} bytes; shape wants {want} float32 values")
        got[name] = np.frombuffer(raw, "<f4").reshape(shapes[name])
    return got
