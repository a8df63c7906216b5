"""Element types of the tensors a kernel binds, and the arithmetic it declares.

A kernel stores each tensor as f32 (the default) or f16 (`Variant.dtypes`). The host
side always speaks float32 bytes in its canonical layouts; the trip to and from a kernel's
buffers converts here, exactly: the judge hands a kernel f16 inputs that it has already
rounded to f16 (so the reference sees the very values the kernel reads), and an f16 output
read back widens to float32 without rounding.

`Arithmetic` says what a kernel computes in, beyond its storage: the judge measures it
against an honest computation in that arithmetic (docs/verdict.md, "Half precision").

Pure Python: runs in Pyodide (struct's "e" format is IEEE binary16, round to nearest even).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import ConfigError

DTYPES = ("f32", "f16")
ITEM_BYTES = {"f32": 4, "f16": 2}
# The adapter feature a kernel needs to declare `enable f16;` and bind array<f16>.
FEATURES = {"f16": "shader-f16"}
F16_MAX = 65504.0  # the largest finite binary16 value


def item_bytes(dtype: str) -> int:
    return ITEM_BYTES[dtype]


def _struct_to_f16(f32: bytes) -> bytes:
    values = memoryview(f32).cast("f")
    return struct.pack(f"<{len(values)}e", *values)  # OverflowError: a finite value past f16


def _struct_from_f16(data: bytes) -> bytes:
    view = memoryview(data)  # bytes, or a page's JS array (its __buffer__)
    n = view.nbytes // 2
    return struct.pack(f"<{n}f", *struct.unpack_from(f"<{n}e", view))


# The conversions, f32 bytes -> f16 bytes (raising OverflowError for a finite value past
# f16's range) and back: struct's here and in the page; a host backend with NumPy swaps in
# the same functions at C speed (use_converters), struct's costing seconds per million values.
_to_f16: Callable[[bytes], bytes] = _struct_to_f16
_from_f16: Callable[[bytes], bytes] = _struct_from_f16


def use_converters(to_f16: Callable[[bytes], bytes], from_f16: Callable[[bytes], bytes]) -> None:
    """Convert with these from now on: the same results as struct's, faster."""
    global _to_f16, _from_f16
    _to_f16, _from_f16 = to_f16, from_f16


def encode(f32: bytes, dtype: str, what: str = "tensor") -> bytes:
    """float32 bytes stored as dtype (f16: each value rounded to nearest, ties to even). A
    finite value past f16's range is a usage error naming `what`: it would become inf."""
    if dtype == "f32":
        return bytes(f32)
    try:
        return _to_f16(f32)
    except OverflowError:
        values = memoryview(f32).cast("f")
        worst = max((abs(x) for x in values if abs(x) != float("inf")), default=0.0)
        raise ConfigError(
            what, f"holds {worst:g}, past f16's largest finite value {F16_MAX:g}"
        ) from None


def check_fits(f32: bytes, dtype: str, what: str) -> None:
    """Refuse (ConfigError naming `what`) float32 values that `dtype` cannot hold."""
    if dtype != "f32":
        encode(f32, dtype, what)


def decode(data: bytes, dtype: str) -> bytes:
    """dtype bytes widened to float32 bytes (exact)."""
    if dtype == "f32":
        return bytes(data)
    return _from_f16(data)


ROUNDINGS = ("f32", "f16")


@dataclass(frozen=True)
class Arithmetic:
    """What a kernel computes in, between loading its inputs and storing its outputs.

    products: the type each product of a dot product is rounded to before it is added
      (f16: packed vec2<f16> / vec4<f16> multiplies).
    accumulate: the type the sums run in (f16: each sum of `chunk` terms in f16, the
      chunks added in float32; chunk 0 with f16 sums means one f16 sum over all terms).
    intermediates: the type the softmax weights P and the score gradients dS are rounded
      to before the products that use them (f16: as FlashAttention's tensor-core kernels
      feed P and dS to their matrix units).
    Everything else (row maxima, sums of exponentials, the LSE, rescaling) is float32.
    """

    products: str = "f32"
    accumulate: str = "f32"
    chunk: int = 0
    intermediates: str = "f32"

    def __post_init__(self) -> None:
        for name in ("products", "accumulate", "intermediates"):
            value = getattr(self, name)
            if value not in ROUNDINGS:
                raise ConfigError(f"arithmetic.{name}", f"one of f32, f16; got {value!r}")
        c = self.chunk
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c <= 1 << 16:
            raise ConfigError("arithmetic.chunk", f"an int in [0, 65536], got {c!r}")
        if c and self.accumulate != "f16":
            raise ConfigError("arithmetic.chunk", "counts f16 sums: needs accumulate = 'f16'")

    @property
    def is_f32(self) -> bool:
        return self == Arithmetic()

    def describe(self) -> str:
        """A short name for the judge's report: what the honest baseline computed in."""
        if self.is_f32:
            return "f32"
        parts = [f"{self.products} products"]
        if self.accumulate == "f16":
            parts.append(f"f16 sums of {self.chunk}" if self.chunk else "f16 sums")
        else:
            parts.append("f32 sums")
        if self.intermediates == "f16":
            parts.append("f16 P and dS")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "products": self.products,
            "accumulate": self.accumulate,
            "chunk": self.chunk,
            "intermediates": self.intermediates,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Arithmetic:
        if not isinstance(d, dict):
            raise ConfigError("arithmetic", f"must be a table, got {d!r}")
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            known = ", ".join(cls.__dataclass_fields__)
            raise ConfigError("arithmetic", f"unknown {unknown}; known: {known}")
        return cls(**d)
