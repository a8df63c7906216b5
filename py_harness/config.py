"""What one attention run is, and the checks that refuse bad input before any GPU work.
Its buffers' sizes (and the check against the device's limits) are sizing.py's; what judging
it costs the demo server is reference_cost.py's.

Pure Python: this module runs inside Pyodide (no NumPy there).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import MISSING, asdict, dataclass, replace

# The largest head_dim any variant may declare (Variant.max_head_dim): FlashAttention-2's.
# The seed's kernels hold a row in array<vec4<f32>, 32> registers (variant.SEED_MAX_HEAD_DIM).
MAX_HEAD_DIM = 256
U32_MAX = 2**32 - 1
# Indices are u32 in WGSL and key distances i32: every sum of a coordinate, the causal
# offset and a window edge (kernel_window) stays below 2**30, far from wrap-around.
MAX_COORD = 2**28
F32_BYTES = 4
# ALiBi slopes reach the kernels zero-padded to this many floats (64 KiB, WebGPU's default
# maxUniformBufferBindingSize), so a kernel may read them as a fixed-size uniform array:
# a storage binding would be a ninth in the fast backward's key-tile pass, over the default
# maxStorageBuffersPerShaderStage of 8.
ALIBI_SLOTS = 16384
# Variable-length batches reach the fast kernels as one vec4<u32> per sequence (first query
# row, first key row, query length, key length) in a fixed-size uniform array of 64 KiB,
# for the same reason: so a varlen batch holds at most this many sequences.
VARLEN_MAX_BATCH = 4096


class ConfigError(ValueError):
    """A configuration or input the kernels cannot run. Names the argument and the limit."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument
        self.detail = message  # the message without the argument (to re-raise it nested)


# tuples in Python, lists in JSON
_SHAPE_FIELDS = ("mask_shape", "alibi_shape", "cu_seqlens_q", "cu_seqlens_k")


def cu_seqlens(lengths: Iterable[int]) -> tuple[int, ...]:
    """FlashAttention-2's cu_seqlens: the running sum of the lengths, from 0 (B + 1 ints)."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return tuple(out)


@dataclass(frozen=True)
class AttentionConfig:
    """One attention problem. Layout: Q/O [B, Sq, H, D], K/V [B, Sk, Hkv, D], f32; a
    variable-length batch (cu_seqlens_q / cu_seqlens_k) packs them [total, H(kv), D]."""

    batch: int
    num_heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    num_kv_heads: int | None = None  # None: same as num_heads (MHA)
    causal: bool = False
    causal_offset: int = 0  # query qi sits at key position qi + causal_offset (may be < 0)
    window: int = 0  # 0: off; else key kj visible when |qi + offset - kj| < window
    # FlashAttention-2's (window_size_left, window_size_right), -1 unbounded: key kj is
    # visible when qa - window_left <= kj <= qa + window_right, qa = qi + causal_offset.
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0  # > 0: scores become softcap * tanh(score / softcap) before masking
    # ALiBi slopes, FlashAttention-2's alibi_slopes: None (off), (num_heads,) or
    # (batch, num_heads). Score (qi, kj) gains -slope * |kj - qa| (after the softcap).
    alibi_shape: tuple[int, ...] | None = None
    mask_shape: tuple[int, ...] | None = None  # additive f32 mask broadcastable to [B,H,Sq,Sk]
    dropout_p: float = 0.0
    seed: int = 0
    scale: float | None = None  # None: 1 / sqrt(head_dim)
    # FlashAttention-2's variable-length batch: B + 1 offsets each (cu_seqlens above), the
    # sequences packed one after another; seq_q / seq_k are then the longest (max_seqlen).
    # Each sequence is aligned on its own, bottom-right as FlashAttention-2 aligns it:
    # query qi of sequence b sits at key position qi + causal_offset + len_k - len_q.
    cu_seqlens_q: tuple[int, ...] | None = None
    cu_seqlens_k: tuple[int, ...] | None = None

    @property
    def varlen(self) -> bool:
        return self.cu_seqlens_q is not None

    @property
    def total_q(self) -> int:
        """Query rows of all sequences: the packed tensors' first dimension."""
        return self.cu_seqlens_q[-1] if self.cu_seqlens_q else self.batch * self.seq_q

    @property
    def total_k(self) -> int:
        return self.cu_seqlens_k[-1] if self.cu_seqlens_k else self.batch * self.seq_k

    def sequences(self) -> list[tuple[int, int, int, int]]:
        """(first query row, query length, first key row, key length) of each sequence in
        the packed rows (dense: every sequence seq_q by seq_k)."""
        cq = self.cu_seqlens_q or tuple(b * self.seq_q for b in range(self.batch + 1))
        ck = self.cu_seqlens_k or tuple(b * self.seq_k for b in range(self.batch + 1))
        return [(cq[b], cq[b + 1] - cq[b], ck[b], ck[b + 1] - ck[b]) for b in range(self.batch)]

    def sequence_runs(self) -> list[tuple[int, int, tuple[int, int, int, int]]]:
        """(first sequence, how many, its sequences() entry) for each run of consecutive
        sequences with the same lengths, both above 0: what the judge computes as one
        dense batch (a dense batch is one run)."""
        runs: list[tuple[int, int, tuple[int, int, int, int]]] = []
        for b, seq in enumerate(self.sequences()):
            if not (seq[1] and seq[3]):
                continue
            if runs and runs[-1][0] + runs[-1][1] == b and runs[-1][2][1::2] == seq[1::2]:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2])
            else:
                runs.append((b, 1, seq))
        return runs

    def sequence_offset(self, len_q: int, len_k: int) -> int:
        """The causal offset of a sequence of these lengths: causal_offset, plus
        len_k - len_q in a variable-length batch (each aligned bottom-right)."""
        return self.causal_offset + (len_k - len_q if self.varlen else 0)

    def dense_sequence(self, len_q: int, len_k: int) -> AttentionConfig:
        """One sequence of these lengths as a dense batch of one, with its own offset: what
        the judge and the loop-budget model compute a variable-length batch's sequences as.
        Per-batch ALiBi slopes keep their shape here; the caller passes the sequence's."""
        return replace(
            self,
            batch=1,
            seq_q=len_q,
            seq_k=len_k,
            causal_offset=self.sequence_offset(len_q, len_k),
            cu_seqlens_q=None,
            cu_seqlens_k=None,
        )

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim) if self.scale is None else float(self.scale)

    def to_dict(self) -> dict:
        d = asdict(self)
        for name in _SHAPE_FIELDS:
            if d[name] is not None:
                d[name] = list(d[name])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> AttentionConfig:
        d = dict(d)
        for name in _SHAPE_FIELDS:
            if d.get(name) is not None:
                if not isinstance(d[name], list | tuple):
                    raise ConfigError(name, f"must be an array of ints, got {_shown(d[name])}")
                d[name] = tuple(d[name])
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ConfigError(sorted(unknown)[0], f"unknown argument (known: {sorted(known)})")
        fields = cls.__dataclass_fields__.values()
        missing = [f.name for f in fields if f.name not in d and f.default is MISSING]
        if missing:
            raise ConfigError(missing[0], f"is missing (required: {', '.join(missing)})")
        return cls(**d)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, inputs and outputs (the mask's is mask_shape): the one
        place they are written down. Q, dO, O, dQ: [B, Sq, H, D]; K, V, dK, dV:
        [B, Sk, Hkv, D]; LSE: [B, H, Sq]. Variable-length (FlashAttention-2's varlen
        layout): Q, dO, O, dQ [total_q, H, D]; K, V, dK, dV [total_k, Hkv, D]; LSE
        [H, total_q]."""
        if self.varlen:
            q = (self.total_q, self.num_heads, self.head_dim)
            kv = (self.total_k, self.kv_heads, self.head_dim)
            lse = (self.num_heads, self.total_q)
        else:
            q = (self.batch, self.seq_q, self.num_heads, self.head_dim)
            kv = (self.batch, self.seq_k, self.kv_heads, self.head_dim)
            lse = (self.batch, self.num_heads, self.seq_q)
        return {
            "q": q,
            "k": kv,
            "v": kv,
            "d_out": q,
            "o": q,
            "lse": lse,
            "dq": q,
            "dk": kv,
            "dv": kv,
        }

    # Element counts of each tensor.
    def q_elems(self) -> int:
        return math.prod(self.shapes()["q"])

    def kv_elems(self) -> int:
        return math.prod(self.shapes()["k"])

    def rows(self) -> int:
        return math.prod(self.shapes()["lse"])

    def mask_elems(self) -> int:
        return math.prod(self.mask_shape) if self.mask_shape is not None else 0

    def alibi_elems(self) -> int:
        return math.prod(self.alibi_shape) if self.alibi_shape is not None else 0

    def input_elems(self) -> dict[str, int]:
        """Elements of each tensor the host sends (HOST_INPUTS; 0: absent)."""
        shapes = self.shapes()
        return {
            "q": math.prod(shapes["q"]),
            "k": math.prod(shapes["k"]),
            "v": math.prod(shapes["v"]),
            "d_out": math.prod(shapes["d_out"]),
            "mask": self.mask_elems(),
            "alibi_slopes": self.alibi_elems(),
        }

    def alibi_stride_b(self) -> int:
        """Slopes between batch elements: 0 for one slope per head, num_heads per batch."""
        return self.num_heads if self.alibi_shape is not None and len(self.alibi_shape) == 2 else 0

    def mask_strides(self) -> tuple[int, int, int, int]:
        """Element strides of the mask over (b, h, qi, kj); 0 where the mask broadcasts."""
        if self.mask_shape is None:
            return (0, 0, 0, 0)
        shape = (1,) * (4 - len(self.mask_shape)) + tuple(self.mask_shape)
        strides = [0, 0, 0, 0]
        step = 1
        for axis in range(3, -1, -1):
            strides[axis] = 0 if shape[axis] == 1 else step
            step *= shape[axis]
        return tuple(strides)  # type: ignore[return-value]


def _int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an int, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(name, f"must be in [{lo}, {hi}], got {value}")
    return value


def validate(cfg: AttentionConfig) -> None:
    """Refuse a configuration the kernels cannot run, naming the argument and the limit."""
    _int("batch", cfg.batch, 1, 65535)
    _int("num_heads", cfg.num_heads, 1, 65535)
    _int("seq_q", cfg.seq_q, 1, MAX_COORD)
    _int("seq_k", cfg.seq_k, 1, MAX_COORD)
    _int("head_dim", cfg.head_dim, 1, MAX_HEAD_DIM)
    _int("num_kv_heads", cfg.kv_heads, 1, cfg.num_heads)
    if cfg.num_heads % cfg.kv_heads:
        raise ConfigError(
            "num_kv_heads",
            f"num_heads ({cfg.num_heads}) must be a multiple of num_kv_heads ({cfg.kv_heads})",
        )
    # Workgroups along z are batch * heads; WebGPU guarantees 65535 per dimension.
    _int("batch * num_heads", cfg.batch * cfg.num_heads, 1, 65535)
    if not isinstance(cfg.causal, bool):
        raise ConfigError("causal", f"must be a bool, got {cfg.causal!r}")
    # Negative: bottom-right alignment with seq_q > seq_k (the seed cannot express it: its
    # offset is a u32, and it does not declare the bottom_right feature).
    _int("causal_offset", cfg.causal_offset, -MAX_COORD, MAX_COORD)
    _int("window", cfg.window, 0, MAX_COORD)
    _int("window_left", cfg.window_left, -1, MAX_COORD)
    _int("window_right", cfg.window_right, -1, MAX_COORD)
    if cfg.window and (cfg.window_left, cfg.window_right) != (-1, -1):
        raise ConfigError(
            "window", "give either window (symmetric) or window_left / window_right, not both"
        )
    cap = cfg.softcap
    if (
        isinstance(cap, bool)
        or not isinstance(cap, int | float)
        or not (math.isfinite(cap) and cap >= 0)
    ):
        raise ConfigError("softcap", f"must be a finite float >= 0 (0: off), got {cap!r}")
    _int("seed", cfg.seed, 0, U32_MAX)
    # The kernels get dropout_p, scale and softcap as float32: each must still be what it
    # says there (0.9999999999 is 1.0 in float32, 1e300 is inf, 1e-50 is 0).
    p = cfg.dropout_p
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= _f32(p) < 1.0:
        raise ConfigError("dropout_p", f"must be a float in [0, 1) as float32, got {p!r}")
    scale = cfg.scale
    if scale is not None and not (
        isinstance(scale, int | float)
        and not isinstance(scale, bool)
        and math.isfinite(_f32(scale))
        and _f32(scale) > 0
    ):
        raise ConfigError(
            "scale", f"must be a float > 0 and finite as float32, or None; got {scale!r}"
        )
    if math.isinf(_f32(cap)):
        raise ConfigError("softcap", f"must be finite as float32, got {cap!r}")
    if cfg.mask_shape is not None:
        _validate_mask_shape(cfg)
    if cfg.alibi_shape is not None:
        _validate_alibi_shape(cfg)
    if cfg.cu_seqlens_q is not None or cfg.cu_seqlens_k is not None:
        _validate_varlen(cfg)


def _f32(x: float) -> float:
    """x rounded to float32 (inf past its range)."""
    return array("f", [x])[0]


def _validate_cu(name: str, cu: object, batch: int) -> int:
    """A cu_seqlens argument's longest sequence, once it is B + 1 rising offsets from 0."""
    if not isinstance(cu, tuple) or len(cu) != batch + 1:
        raise ConfigError(
            name, f"must be a tuple of batch + 1 = {batch + 1} offsets, got {_shown(cu)}"
        )
    for i, c in enumerate(cu):
        if isinstance(c, bool) or not isinstance(c, int):
            raise ConfigError(name, f"entry {i} must be an int, got {c!r}")
    if cu[0] != 0:
        raise ConfigError(name, f"must start at 0, got {cu[0]}")
    longest = 0
    for i in range(batch):
        n = cu[i + 1] - cu[i]
        if n < 0:
            raise ConfigError(
                name, f"must not decrease: entry {i + 1} ({cu[i + 1]}) < entry {i} ({cu[i]})"
            )
        longest = max(longest, n)
    if cu[-1] > MAX_COORD:
        raise ConfigError(name, f"total length {cu[-1]} is over the limit of {MAX_COORD}")
    return longest


def _shown(x: object) -> str:
    text = repr(list(x)) if isinstance(x, tuple | list) else repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _validate_varlen(cfg: AttentionConfig) -> None:
    if cfg.cu_seqlens_q is None or cfg.cu_seqlens_k is None:
        raise ConfigError(
            "cu_seqlens_q" if cfg.cu_seqlens_q is None else "cu_seqlens_k",
            "a variable-length batch needs both cu_seqlens_q and cu_seqlens_k",
        )
    _int("batch", cfg.batch, 1, VARLEN_MAX_BATCH)
    for name, cu, seq in (
        ("cu_seqlens_q", cfg.cu_seqlens_q, "seq_q"),
        ("cu_seqlens_k", cfg.cu_seqlens_k, "seq_k"),
    ):
        longest = _validate_cu(name, cu, cfg.batch)
        if getattr(cfg, seq) != longest:
            raise ConfigError(
                seq,
                f"must be the longest sequence of {name} (max_seqlen: {longest}), got "
                f"{getattr(cfg, seq)}",
            )
    if cfg.mask_shape is not None:
        raise ConfigError(
            "mask", "an additive mask is [B, H, Sq, Sk]: not with a variable-length batch"
        )
    for _, len_q, _, len_k in cfg.sequences():
        if abs(cfg.sequence_offset(len_q, len_k)) > MAX_COORD:
            raise ConfigError(
                "causal_offset",
                f"{cfg.causal_offset} plus a sequence's len_k - len_q is over {MAX_COORD}",
            )


def _validate_mask_shape(cfg: AttentionConfig) -> None:
    shape = cfg.mask_shape
    full = (cfg.batch, cfg.num_heads, cfg.seq_q, cfg.seq_k)
    names = ("batch", "heads", "seq_q", "seq_k")
    if not isinstance(shape, tuple) or not 1 <= len(shape) <= 4:
        raise ConfigError("mask", f"must have 1 to 4 dimensions, got shape {shape!r}")
    padded = (1,) * (4 - len(shape)) + shape
    for axis, (got, want) in enumerate(zip(padded, full, strict=True)):
        if isinstance(got, bool) or not isinstance(got, int) or got not in (1, want):
            raise ConfigError(
                "mask",
                f"shape {list(shape)} does not broadcast to [B, H, Sq, Sk] = {list(full)}: "
                f"its {names[axis]} dimension is {got}, must be 1 or {want}",
            )


def _validate_alibi_shape(cfg: AttentionConfig) -> None:
    shape = cfg.alibi_shape
    allowed = ((cfg.num_heads,), (cfg.batch, cfg.num_heads))
    if not isinstance(shape, tuple) or shape not in allowed:
        raise ConfigError(
            "alibi_slopes",
            f"shape must be (num_heads,) = {list(allowed[0])} or (batch, num_heads) = "
            f"{list(allowed[1])}, got {list(shape) if isinstance(shape, tuple) else shape!r}",
        )
    if cfg.alibi_elems() > ALIBI_SLOTS:
        raise ConfigError(
            "alibi_slopes",
            f"{cfg.alibi_elems()} slopes (batch x num_heads), over the {ALIBI_SLOTS} the "
            "kernels read (one 64 KiB uniform buffer); give one slope per head instead",
        )


# Kernels see every visibility rule as one window on d = kj - (qi + causal_offset):
# -left <= d <= right, a bound of WINDOW_OPEN meaning none (it exceeds any distance).
WINDOW_OPEN = MAX_COORD * 2


def kernel_window(cfg: AttentionConfig) -> tuple[int, int]:
    """(left, right): key kj is visible to query qi when -left <= kj - qa <= right, with
    qa = qi + causal_offset; causal caps right at 0, window w is left = right = w - 1."""
    if cfg.window > 0:
        left = right = cfg.window - 1
    else:
        left = WINDOW_OPEN if cfg.window_left < 0 else cfg.window_left
        right = WINDOW_OPEN if cfg.window_right < 0 else cfg.window_right
    if cfg.causal:
        right = min(right, 0)
    return left, right


def tiles_are_whole(cfg: AttentionConfig, rows: int, cols: int) -> bool:
    """Whether every tile a tiled pass loads lies inside its tensors, for square tiles of
    `rows` queries or keys and column blocks of `cols` (> 0) of head_dim: a dense batch
    whose seq_q and seq_k are multiples of rows, head_dim a multiple of cols, and visible
    ranges that start on tile boundaries. A pass walks the keys a query tile sees (and the
    queries a key tile sees) from the first visible one: from q0 + causal_offset - left
    (k0 - causal_offset - right), on a boundary where that bound is open or the offset a
    multiple of rows (kernel_window)."""
    if cfg.varlen or cols <= 0 or cfg.head_dim % cols:
        return False
    if cfg.seq_q % rows or cfg.seq_k % rows:
        return False
    left, right = kernel_window(cfg)
    shift = cfg.causal_offset
    return (left == WINDOW_OPEN or (shift - left) % rows == 0) and (
        right == WINDOW_OPEN or (shift + right) % rows == 0
    )


def pack_seqlens(cfg: AttentionConfig) -> bytes:
    """The seqlens uniform: per sequence b, u32 (first query row, first key row, query
    length, key length), zero-padded to VARLEN_MAX_BATCH sequences (all zeros for a dense
    batch, whose kernels compute the same from b, seq_q and seq_k)."""
    words = array("I", bytes(16 * VARLEN_MAX_BATCH))
    if cfg.varlen:
        for b, (q0, len_q, k0, len_k) in enumerate(cfg.sequences()):
            words[4 * b : 4 * b + 4] = array("I", (q0, k0, len_q, len_k))
    return words.tobytes()


# ---- buffers, by the role a kernel binds them in ------------------------------------------
# The host sends HOST_INPUTS and reads back OUTPUTS, always as these separate tensors
# (cfg.shapes()). A variant may bind a packed role instead of its parts: the runner builds
# a packed input from its parts and splits a packed gradient back into its parts (layouts.py
# has the layouts). params is the uniform struct (params.py); stats the backward's scratch.
HOST_INPUTS = ("q", "k", "v", "d_out", "mask", "alibi_slopes")
OUTPUTS = ("o", "lse", "dq", "dk", "dv")
PACKED: dict[str, tuple[str, ...]] = {
    "kv": ("k", "v"),  # [B, Sk, Hkv, 2, D]
    "qkv": ("q", "k", "v"),  # [B, S, 3, H, D]: needs seq_q == seq_k and num_kv_heads == H
    "dkv": ("dk", "dv"),
    "dqkv": ("dq", "dk", "dv"),
}
# seqlens: the sequences of a variable-length batch (pack_seqlens), built from the config.
ROLES = (*HOST_INPUTS, "kv", "qkv", "params", "seqlens", *OUTPUTS, "dkv", "dqkv", "stats")


def check_input_bytes(
    cfg: AttentionConfig,
    tensors: dict[str, bytes],
    scan: Callable[[list[bytes]], list[bool]] | None = None,
) -> None:
    """Each tensor must be exactly the f32 byte length its shape asks for, then finite
    (_refuse_nonfinite). scan: which of the tensors hold an Inf or NaN, all asked at once
    (the native backends spread them over threads: Device.scan_nonfinite); by default
    scan_each."""
    present: dict[str, bytes] = {}
    for name, elems in cfg.input_elems().items():
        data = tensors.get(name)
        if data is None:
            if elems and name != "d_out":
                raise ConfigError(name, "is missing")
            continue
        if len(data) != elems * F32_BYTES:
            raise ConfigError(
                name,
                f"has {len(data)} bytes; shape wants {elems} float32 values = "
                f"{elems * F32_BYTES} bytes",
            )
        present[name] = data
    flagged = (scan or scan_each)(list(present.values()))
    for (name, data), bad in zip(present.items(), flagged, strict=True):
        if bad:
            _refuse_nonfinite(name, data, allow_neg_inf=name == "mask")


def scan_each(tensors: list[bytes]) -> list[bool]:
    """Whether each tensor holds an Inf or NaN: any_nonfinite on each, one after another."""
    return [any_nonfinite(t) for t in tensors]


# bytes.translate tables over a float32's two high bytes (little-endian): its exponent is
# all ones (Inf or NaN) exactly when byte 3 has its low 7 bits set and byte 2 its top bit.
_EXP_HIGH = bytes(int(b & 0x7F == 0x7F) for b in range(256))
_EXP_LOW = bytes(int(b >= 0x80) for b in range(256))


def any_nonfinite(data: bytes) -> bool:
    """Whether some float32 of `data` (little-endian) is Inf or NaN: its exponent bits all
    ones. At C speed (extended slices, `in`, translate): where no float's high byte is
    0x7f or 0xff (no |x| >= 2^127), the answer is no; else each float's two high bytes
    become 0/1 flags, ANDed as integers. 5-8 ms for 16 MB of normal draws here, where
    math.fsum over the floats took 100-132 ms."""
    high = data[3::4]  # sign and the exponent's top 7 bits of each float
    if b"\x7f" not in high and b"\xff" not in high:
        return False
    flags = int.from_bytes(high.translate(_EXP_HIGH), "little")
    return flags & int.from_bytes(data[2::4].translate(_EXP_LOW), "little") != 0


def _refuse_nonfinite(name: str, data: bytes, allow_neg_inf: bool) -> None:
    """Refuse NaN and +-Inf (a mask may hold -inf: that is how it masks a key): a
    ConfigError naming the first float that is not allowed, if any.

    The kernels would turn a NaN into NaN gradients for a whole row, or silently treat it
    as masked; either way a pass would not mean what it says. The scan (any_nonfinite at
    C speed, or the threaded one) finds out; only when it says yes does this slow one look
    for the first.
    """
    values = array("f")
    values.frombytes(data)
    for i, x in enumerate(values):
        if math.isnan(x) or (math.isinf(x) and not (allow_neg_inf and x < 0)):
            raise ConfigError(
                name,
                f"holds {x} at flat index {i}; inputs must be finite float32"
                + (" (-inf is allowed)" if allow_neg_inf else ""),
            ) from None
