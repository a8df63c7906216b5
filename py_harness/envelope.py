"""A variant's envelope: the configurations its kernels claim to compute.

A kernel written for one model rarely takes every shape: self-attention only (seq_q ==
seq_k), a few head_dims compiled in, causal always, no GQA, a longest sequence its scratch
holds. The envelope says so. A case outside it is never run and never red: `refusal` says
why it is outside, and the case matrix a variant is judged on is generated inside it
(host/judge/generated.py).

Axes with a range or a set of values (head_dim, seq_q, seq_k, batch, num_heads, group:
query heads per K/V head), causal required, refused or either, the tile sizes whose edges the
generated matrix probes, and any further constraint as a boolean expression over the
configuration's names (params.SCOPE_NAMES). Pure Python: runs in Pyodide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import MAX_COORD, MAX_HEAD_DIM, AttentionConfig, ConfigError
from .expr import Expr, as_bool, compile_expr
from .params import SCOPE_NAMES, expression_scope

# The axes an envelope bounds, each with its hard limits (config.validate's).
AXES: dict[str, tuple[int, int]] = {
    "head_dim": (1, MAX_HEAD_DIM),
    "seq_q": (1, MAX_COORD),
    "seq_k": (1, MAX_COORD),
    "batch": (1, 65535),
    "num_heads": (1, 65535),
    "group": (1, 65535),
}
CAUSAL = ("either", "required", "refused")
KEYS = (*AXES, "causal", "require", "tiles")


@dataclass(frozen=True)
class Axis:
    """An axis's allowed values: a set (values), or a range [lo, hi] of multiples of step."""

    values: tuple[int, ...] = ()
    lo: int = 1
    hi: int = MAX_COORD
    step: int = 1

    def allows(self, n: int) -> bool:
        if self.values:
            return n in self.values
        return self.lo <= n <= self.hi and n % self.step == 0

    def describe(self, name: str) -> str:
        """The rule as it reads: "head_dim in [32, 64]", "seq_q <= 1024", "seq_k a
        multiple of 64" (bounds that are the hard limits' left out)."""
        if self.values:
            return f"{name} in {list(self.values)}"
        lo, hi = AXES[name]
        low, high = self.lo > lo, self.hi < hi
        text = (
            f"{self.lo} <= {name} <= {self.hi}"
            if low and high
            else f"{name} >= {self.lo}"
            if low
            else f"{name} <= {self.hi}"
            if high
            else name
        )
        if self.step > 1:
            text += f"{',' if low or high else ''} a multiple of {self.step}"
        return text

    def to_spec(self) -> list[int] | dict[str, int]:
        if self.values:
            return list(self.values)
        return {"min": self.lo, "max": self.hi, "multiple_of": self.step}

    @classmethod
    def parse(cls, name: str, spec: Any, where: str) -> Axis:
        lo, hi = AXES[name]
        if isinstance(spec, list):
            if not spec or not all(_is_int(v) and lo <= v <= hi for v in spec):
                raise ConfigError(where, f"a list of ints in [{lo}, {hi}], got {spec!r}")
            return cls(values=tuple(sorted(set(spec))))
        if not isinstance(spec, Mapping) or set(spec) - {"min", "max", "multiple_of"}:
            raise ConfigError(where, f"a list of values or {{min, max, multiple_of}}, got {spec!r}")
        got = {k: spec.get(k, d) for k, d in (("min", lo), ("max", hi), ("multiple_of", 1))}
        for key, value in got.items():
            if not _is_int(value) or not (lo <= value <= hi or key == "multiple_of" and value >= 1):
                raise ConfigError(
                    f"{where}.{key}", f"must be an int in [{lo}, {hi}], got {value!r}"
                )
        axis = cls(lo=got["min"], hi=got["max"], step=got["multiple_of"])
        if not any(axis.allows(n) for n in range(axis.lo, min(axis.hi, axis.lo + axis.step) + 1)):
            raise ConfigError(where, f"allows no value: {axis.describe(name)}")
        return axis


@dataclass(frozen=True)
class Envelope:
    axes: tuple[tuple[str, Axis], ...] = ()
    causal: str = "either"
    require: tuple[Expr, ...] = ()
    # Sizes (rows of a tile, keys of a block) whose edges the generated matrix probes.
    tiles: tuple[int, ...] = ()

    def axis(self, name: str) -> Axis:
        """The axis's allowed values (the whole range where the envelope says nothing)."""
        lo, hi = AXES[name]
        return dict(self.axes).get(name, Axis(lo=lo, hi=hi))

    def refusal(self, cfg: AttentionConfig) -> str | None:
        """Why cfg lies outside the envelope (None: inside), naming the bound and the value."""
        values = {
            "head_dim": cfg.head_dim,
            "seq_q": cfg.seq_q,
            "seq_k": cfg.seq_k,
            "batch": cfg.batch,
            "num_heads": cfg.num_heads,
            "group": cfg.num_heads // cfg.kv_heads,
        }
        for name, axis in self.axes:
            if not axis.allows(values[name]):
                return f"{axis.describe(name)} ({name}={values[name]})"
        if self.causal == "required" and not cfg.causal:
            return "causal only (causal=False)"
        if self.causal == "refused" and cfg.causal:
            return "never causal (causal=True)"
        if self.require:
            scope = expression_scope(cfg)
            for rule in self.require:
                if not as_bool(rule(scope), rule.where):
                    shown = ", ".join(f"{n}={scope[n]}" for n in sorted(rule.names))
                    return f"{rule.text} ({shown})"
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {name: axis.to_spec() for name, axis in self.axes}
        d |= {"causal": self.causal, "require": [r.text for r in self.require]}
        return d | {"tiles": list(self.tiles)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "envelope") -> Envelope:
        """From a variant file's [envelope] table (or to_dict's form), every key checked."""
        if not isinstance(d, Mapping):
            raise ConfigError(where, f"must be a table, got {d!r}")
        unknown = sorted(set(d) - set(KEYS))
        if unknown:
            hint = " (element types: the file's top-level dtypes)" if unknown[0] == "dtype" else ""
            raise ConfigError(
                f"{where}.{unknown[0]}", f"unknown key; known: {', '.join(KEYS)}{hint}"
            )
        axes = tuple(
            (name, Axis.parse(name, d[name], f"{where}.{name}")) for name in AXES if name in d
        )
        causal = d.get("causal", "either")
        if causal not in CAUSAL:
            raise ConfigError(f"{where}.causal", f"one of {', '.join(CAUSAL)}, got {causal!r}")
        require = d.get("require", [])
        if not isinstance(require, list):
            raise ConfigError(f"{where}.require", f"a list of expressions, got {require!r}")
        rules = tuple(
            compile_expr(r, SCOPE_NAMES, f"{where}.require[{i}]") for i, r in enumerate(require)
        )
        tiles = d.get("tiles", [])
        if not isinstance(tiles, list) or not all(_is_int(t) and 1 <= t <= 4096 for t in tiles):
            raise ConfigError(f"{where}.tiles", f"a list of ints in [1, 4096], got {tiles!r}")
        return cls(axes, causal, rules, tuple(tiles))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
