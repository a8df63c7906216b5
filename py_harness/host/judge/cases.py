"""The case matrix: a control case plus targeted combinations with awkward sizes.

Not a full cross product. `smoke=True` marks the fast subset; `long=True` the cases too
slow for CPU adapters in CI (run by `check --long`, `pytest --long`, and on GPUs). Ids read
like the case, e.g. `d59-sq113-sk203-gqa6x2-causal`, and parse back (`parse_id`, for
`--case ID` outside the matrix). Sizes are chosen for SwiftShader on 2 CPU cores (about
0.15-0.8 GFLOP/s): the matrix without the long cases is about a GFLOP.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from ...config import AttentionConfig, ConfigError, cu_seqlens, validate

MASK_KINDS = ("none", "full", "batch", "keypad", "rows-inf", "rows-1e30")
# ALiBi slopes: none, one per head ([H]), or one per batch element and head ([B, H])
ALIBI_KINDS = ("none", "head", "batch")


def mask_shape(
    kind: str, batch: int, num_heads: int, seq_q: int, seq_k: int
) -> tuple[int, ...] | None:
    """The additive mask's shape for a mask kind (Case.mask, bench --mask); inputs.make_mask
    draws its values."""
    return {
        "none": None,
        "full": (seq_q, seq_k),
        "batch": (batch, 1, seq_q, seq_k),
        "keypad": (batch, 1, 1, seq_k),
        "rows-inf": (batch, num_heads, seq_q, seq_k),
        "rows-1e30": (seq_q, seq_k),
    }[kind]


def alibi_shape(kind: str, batch: int, num_heads: int) -> tuple[int, ...] | None:
    """ALiBi slopes' shape (Case.alibi, bench --alibi): none, one per head, or per batch
    element and head."""
    return {"none": None, "head": (num_heads,), "batch": (batch, num_heads)}[kind]


def _decimal(x: float) -> str:
    """x in positional notation with the fewest digits that read back as x (2.5, 10, 0.17:
    what `:g` gave for the matrix's values), never an exponent, whose '-' (1e-05) an id
    could not hold, nor a rounding (`:g` keeps 6 digits) that would name another case."""
    text = format(Decimal(repr(float(x))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True)
class Case:
    head_dim: int
    seq_q: int
    seq_k: int
    num_heads: int = 4
    num_kv_heads: int | None = None  # None: as many as num_heads (MHA); an int once made
    batch: int = 1
    causal: bool = False
    bottom_right: bool = False  # causal_offset = seq_k - seq_q
    offset: int = 0  # an explicit causal_offset (queries shifted right of the keys)
    window: int = 0
    # FlashAttention-2's (window_size_left, window_size_right); -1 unbounded
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0
    alibi: str = "none"
    mask: str = "none"
    dropout_p: float = 0.0
    seed: int = 1234
    smoke: bool = False
    repeat_backward: bool = False  # run backward twice; results must be bit-identical
    check_dropout_fraction: bool = False
    # FlashAttention's overflow test: q x 5, k and v x 3 (large logits must stay finite)
    large_logits: bool = False
    # Each row's scores shifted by hundreds, up or down (inputs.py: K plus one vector common
    # to every key), past float32 exp's range (it overflows above 88.7, is 0 below -104);
    # softmax does not change, so a kernel that takes exp of a row's max or of an unshifted
    # score fails
    shifted_scores: bool = False
    long: bool = False  # too slow for CPU adapters in CI (see the module docstring)
    # A variable-length batch: each sequence's query and key lengths (made by varlen(),
    # which sets batch, seq_q and seq_k to match); empty: a dense batch.
    lens_q: tuple[int, ...] = ()
    lens_k: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        """Resolve num_kv_heads (None: MHA) and refuse a case that no configuration can be
        made of, naming the field and the limit (ConfigError, a ValueError): here, where the
        case is written, rather than later, when a variant refuses its config for another
        reason (a case with 6 heads over the old default of 4 KV heads read as "does not
        support gqa"). The other limits (head_dim, lengths, windows) are config.validate's."""
        if self.num_kv_heads is None:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        for name in ("head_dim", "batch", "num_heads", "num_kv_heads"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if self.num_kv_heads > self.num_heads:
            raise ConfigError(
                "num_kv_heads",
                f"must be <= num_heads ({self.num_heads}), got {self.num_kv_heads}",
            )
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                "num_kv_heads",
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})",
            )
        if self.mask not in MASK_KINDS:
            raise ConfigError("mask", f"unknown {self.mask!r}; known: {', '.join(MASK_KINDS)}")
        if self.alibi not in ALIBI_KINDS:
            raise ConfigError("alibi", f"unknown {self.alibi!r}; known: {', '.join(ALIBI_KINDS)}")
        if self.lens_q or self.lens_k:
            self._check_lens()
        else:
            for name in ("seq_q", "seq_k"):
                if getattr(self, name) < 1:
                    raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")

    def _check_lens(self) -> None:
        """A variable-length batch: one length per sequence on each side, 0 allowed (a
        sequence without queries or keys); seq_q / seq_k the longest. Not all 0 is
        config.validate's (seq_q >= 1): random_cases draws such batches and relies on
        validate to refuse them, after the case is made."""
        for name, lens, seq in (("lens_q", self.lens_q, "seq_q"), ("lens_k", self.lens_k, "seq_k")):
            if len(lens) != self.batch:
                raise ConfigError(
                    name, f"must hold batch = {self.batch} lengths, got {len(lens)}: {lens}"
                )
            if min(lens) < 0:
                raise ConfigError(name, f"lengths must be >= 0, got {min(lens)}")
            if getattr(self, seq) != max(lens):
                raise ConfigError(
                    seq, f"must be the longest of {name} ({max(lens)}), got {getattr(self, seq)}"
                )

    @classmethod
    def parse(cls, case_id: str) -> Case:
        """The case an id names (parse_id: id's inverse, flags the id lacks at defaults)."""
        return parse_id(case_id)

    @property
    def id(self) -> str:
        """The case as pytest's id and `--case`'s argument, e.g.
        d59-sq113-sk203-gqa6x2-causal: parts joined by '-', none of which holds a '-' of
        its own except causal-br, alibi-b and mask-<kind> (so parse_id reads it back)."""
        if self.lens_q:
            lens = ".".join(map(str, self.lens_q)), ".".join(map(str, self.lens_k))
            parts = [f"d{self.head_dim}", f"vq{lens[0]}", f"vk{lens[1]}"]
        else:
            parts = [f"d{self.head_dim}", f"sq{self.seq_q}", f"sk{self.seq_k}"]
            if self.batch != 1:
                parts.append(f"b{self.batch}")
        if self.num_kv_heads == self.num_heads:
            parts.append(f"h{self.num_heads}")
        elif self.num_kv_heads == 1:
            parts.append(f"mqa{self.num_heads}x1")
        else:
            parts.append(f"gqa{self.num_heads}x{self.num_kv_heads}")
        if self.causal:
            parts.append("causal-br" if self.bottom_right else "causal")
        elif self.bottom_right:
            parts.append("br")
        if self.offset:
            parts.append(f"off{self.offset}" if self.offset > 0 else f"offn{-self.offset}")
        if self.window:
            parts.append(f"win{self.window}")
        if self.window_left >= 0:
            parts.append(f"wl{self.window_left}")
        if self.window_right >= 0:
            parts.append(f"wr{self.window_right}")
        if self.softcap:
            parts.append(f"cap{_decimal(self.softcap)}")
        if self.alibi != "none":
            parts.append("alibi" if self.alibi == "head" else "alibi-b")
        if self.mask != "none":
            parts.append(f"mask-{self.mask}")
        if self.dropout_p:
            parts.append(f"drop{_decimal(self.dropout_p)}")
        if self.large_logits:
            parts.append("big")
        if self.shifted_scores:
            parts.append("shift")
        return "-".join(parts)

    @property
    def large_scores(self) -> bool:
        """Scores of tens or hundreds, whose rounding the overflow test's factors allow."""
        return self.large_logits or self.shifted_scores

    def config(self) -> AttentionConfig:
        return AttentionConfig(
            batch=self.batch,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            seq_q=self.seq_q,
            seq_k=self.seq_k,
            head_dim=self.head_dim,
            causal=self.causal,
            causal_offset=self.seq_k - self.seq_q if self.bottom_right else self.offset,
            window=self.window,
            window_left=self.window_left,
            window_right=self.window_right,
            softcap=self.softcap,
            alibi_shape=alibi_shape(self.alibi, self.batch, self.num_heads),
            mask_shape=mask_shape(self.mask, self.batch, self.num_heads, self.seq_q, self.seq_k),
            dropout_p=self.dropout_p,
            seed=self.seed,
            cu_seqlens_q=cu_seqlens(self.lens_q) if self.lens_q else None,
            cu_seqlens_k=cu_seqlens(self.lens_k) if self.lens_k else None,
        )


def varlen(head_dim: int, lens_q: tuple[int, ...], lens_k: tuple[int, ...], **kw: object) -> Case:
    """A variable-length batch case: sequence b has lens_q[b] queries and lens_k[b] keys
    (packed, FlashAttention-2's cu_seqlens); its id lists them (vq77.0.130-vk130.5.0)."""
    return Case(
        head_dim,
        max(lens_q),
        max(lens_k),
        batch=len(lens_q),
        lens_q=lens_q,
        lens_k=lens_k,
        **kw,  # type: ignore[arg-type]
    )


CONTROL = Case(64, 128, 128, batch=2, smoke=True, repeat_backward=True)
# Dropout's edge: a weight is dropped when u < p and kept when u == p (u = 24 hashed bits x
# 2^-24). At p = 0.5 the seed 3579 gives u == p for one weight, at (b, h, qi, kj) = (0, 0,
# 5, 2); ties are 2^-24 per weight, so no other case has one (tests/test_dropout_hash.py).
DROPOUT_EDGE = Case(16, 64, 64, dropout_p=0.5, seed=3579, smoke=True)

CASES: tuple[Case, ...] = (
    CONTROL,
    # head_dim edges: 1 and 3 (partial vec4), 111 (odd), 128 (the seed's maximum; over it
    # below)
    Case(1, 17, 17, smoke=True),
    Case(3, 1, 1),
    Case(16, 17, 17, num_heads=6, num_kv_heads=2, causal=True),
    Case(111, 203, 113, num_heads=6, num_kv_heads=1),
    Case(128, 128, 217, window=32, smoke=True),
    # causal, top-left and bottom-right aligned; GQA and MQA
    Case(59, 113, 203, num_heads=6, num_kv_heads=2, causal=True, smoke=True),
    Case(59, 113, 203, causal=True, bottom_right=True, smoke=True),
    Case(64, 300, 130, num_heads=6, num_kv_heads=1, causal=True),
    # window alone and with causal
    Case(59, 203, 113, window=17),
    # ... with the last key a query tile sees unclipped by Sk and alone in the seed's last
    # tile of 16 keys (128 + 18 - 1 = 145 keys from key 0: 9 tiles and 1), found by a bug
    # planted blind (mutants.py, bwd-dq-window-end): the other windows' ranges end at Sk or
    # fill their last tile further
    Case(16, 128, 160, num_heads=2, num_kv_heads=2, window=18, smoke=True),
    # ... and with an offset as wide as the window, where the seed backward's ranges meet
    # their edges exactly (found by `py-harness mutate`: docs/verdict.md): the dQ pass's
    # query tile starts at the window (q0 + offset == window), the dK/dV pass's first key
    # tile ends between window and window + offset and its second starts at window +
    # offset (128), and the dQ pass's range end (79 + 64 + 64 = 207) lies inside Sk
    Case(16, 80, 230, num_heads=2, num_kv_heads=2, offset=64, window=64, smoke=True),
    # ... and window 1: each row sees the key on its diagonal alone (a test for "no window"
    # written as window > 1 shows only here)
    Case(16, 40, 48, num_heads=2, num_kv_heads=2, window=1, smoke=True),
    Case(64, 130, 300, causal=True, bottom_right=True, window=40, smoke=True),
    # additive masks; the full one over the fast variant's wholly visible tiles too (a
    # whole-tile test that forgot the mask skipped it there: found by `py-harness mutate`)
    Case(64, 113, 203, mask="full", smoke=True),
    Case(32, 59, 111, batch=2, mask="batch"),
    Case(64, 113, 203, batch=2, mask="keypad", smoke=True),
    Case(16, 59, 111, batch=2, mask="rows-inf", smoke=True),
    Case(16, 59, 111, mask="rows-1e30", causal=True, smoke=True),
    # dropout: the mask is rebuilt on the host from the same hash
    Case(
        64,
        128,
        217,
        dropout_p=0.17,
        smoke=True,
        repeat_backward=True,
        check_dropout_fraction=True,
    ),
    Case(59, 113, 203, num_heads=6, num_kv_heads=2, causal=True, dropout_p=0.17),
    DROPOUT_EDGE,
    # at least 1024 keys
    Case(64, 64, 1031, num_heads=2, num_kv_heads=2, smoke=True),
    # many heads over long keys: each dK/dV workgroup of the fast variant takes several key
    # tiles, in rounds (kernels.Variant.dq_slots gives 4 slots for 5 key tiles here)
    Case(8, 40, 300, batch=2, num_heads=64, num_kv_heads=32, smoke=True),
    # ... and causal, where the work of a key tile falls with its index, so the rounds change
    # direction (4 slots over 5 key tiles: the second round, one key, runs in reverse)
    Case(
        8,
        129,
        257,
        batch=2,
        num_heads=32,
        num_kv_heads=32,
        causal=True,
        bottom_right=True,
        smoke=True,
    ),
    # ... and with a left window bound, whose key tiles' query ranges stop short of the
    # end, so a slot's second round adds rows its first did not reach (slot 0: no query
    # sees its first tile, keys 0-63, and all see its second) and the dQ sum pass zeroes
    # the sums for the next run (run twice); right 300 keeps the band layout too large
    # here (Variant.dq_band_rows)
    Case(
        8,
        40,
        257,
        batch=2,
        num_heads=32,
        num_kv_heads=32,
        offset=80,
        window_left=10,
        window_right=300,
        smoke=True,
        repeat_backward=True,
    ),
    # a long sum at the largest head_dim: the forward's LSE failed the 2x rule here on an
    # H200 (1.26x at Sk 1024) while it summed the softmax denominator key by key
    Case(128, 16, 1024, num_heads=2, num_kv_heads=1),
    # rows left with no visible key by the window (queries shifted past the keys), alone
    # and with causal: O = 0, LSE = sentinel, zero gradients, no NaN
    Case(32, 17, 17, offset=20, window=8),
    Case(32, 40, 17, causal=True, offset=20, window=6),
    # The fast variant's 64 x 64 tiles skip per-element checks when a tile is wholly
    # visible: a tile one key past the causal edge (offset 62: last key 63, first query
    # at 62) and tiles whose farthest pair is exactly `window` apart (offset 1, window 64)
    Case(32, 66, 128, causal=True, bottom_right=True, smoke=True),
    Case(16, 128, 130, offset=1, window=64, smoke=True),
    # one visible key per row (window 1, Sk 1): P must be exactly 1 (found by the fuzzer)
    Case(109, 7, 1, num_heads=3, num_kv_heads=3, window=1),
    # The fast kernels read rows as vec4s when head_dim % 4 == 0 and cut them from two
    # vec4s otherwise: head_dim 18 (rows on 8-byte boundaries), and head_dim 32 with an odd
    # number of query rows (3 x 59), where dQ's partial sums after the [Delta, LSE] pairs
    # must start on a vec4
    Case(18, 113, 59, num_heads=2, num_kv_heads=2, causal=True, smoke=True),
    Case(32, 59, 203, num_heads=3, num_kv_heads=1, smoke=True),
    # Rows of two visible keys, each key seen by two queries: P (about 1/2) and dS dominate
    # the error, so an intermediate rounded to fewer bits shows here first (mutants.py)
    Case(16, 256, 256, causal=True, window=2, smoke=True),
    # FlashAttention's overflow test: large logits stay finite and within the rule
    Case(64, 17, 128, large_logits=True, smoke=True),
    Case(32, 5, 17, num_heads=6, num_kv_heads=2, causal=True, large_logits=True),
    # Rows whose scores all lie past exp's float32 range, above and below: an LSE taken as
    # log(exp(m) l) is infinite there (docs/records/verdict.md, third round).
    # head_dim 64: a power-of-two scale, which the seed's K scaling needs to be exact
    Case(64, 40, 77, num_kv_heads=2, causal=True, shifted_scores=True, smoke=True),
    # Long reductions, where a kernel that adds one term at a time is 4-10x less accurate
    # than float32 BLAS (docs/verdict.md): a key seen by the rows of many query heads
    # (MQA 16 over 1: 4096 terms per dK/dV element; GQA 4 per KV head, causal); a single
    # key (every P is 1: dV is a plain sum of 2048 or 65536 rows of dO); a single query
    # over thousands of keys (O, LSE and dQ sum them all).
    Case(64, 256, 64, num_heads=16, num_kv_heads=1, smoke=True),
    # ... and a key tile's 25 query tiles (5 heads x 5) over 3 parts (Variant.kv_parts),
    # interleaved: tile j of head g in part (g + j) % 3, 9, 8 and 8 of them
    Case(32, 300, 70, num_heads=5, num_kv_heads=1, smoke=True),
    Case(32, 384, 96, num_heads=8, num_kv_heads=2, causal=True),
    Case(64, 512, 1, num_heads=4, num_kv_heads=1, smoke=True),
    Case(64, 4096, 1, num_heads=16, num_kv_heads=1),
    Case(64, 1, 2048, num_heads=4, num_kv_heads=1, smoke=True),
    Case(128, 1, 4096, num_heads=8, num_kv_heads=2),
    # FlashAttention-2's axes beyond the seed (docs/features.md); the seed variant skips
    # them. Bottom-right causal with Sq > Sk (offset -90: the first 90 rows see no key)
    Case(59, 203, 113, num_heads=6, num_kv_heads=2, causal=True, bottom_right=True, smoke=True),
    # (left, right) windows: asymmetric; left only, bottom-right (past the causal edge by
    # 3 keys); one key per row (0, 0); with causal (right capped at 0), Sq > Sk. The first
    # runs its backward twice: the fast backward's band layout stores dQ's partial sums
    # (Variant.dq_band_rows), and a second run must not add onto the first's
    Case(48, 113, 203, window_left=5, window_right=40, smoke=True, repeat_backward=True),
    # ... right 3 past the causal edge and left 200 (wide and asymmetric, so the fast
    # variant has wholly visible tiles that a transposed test takes for others), with an
    # odd head_dim: a left bound that the backward's first round does not reach, so the
    # dQ sum pass zeroes the slots' sums float by float (rows unaligned), row by row
    Case(
        31,
        130,
        300,
        bottom_right=True,
        window_left=200,
        window_right=3,
        smoke=True,
        repeat_backward=True,  # the zeroing, float by float, checked by a second run
    ),
    # ... the left side unbounded (-1), the right 3 past the causal edge
    Case(32, 130, 300, bottom_right=True, window_right=3),
    Case(16, 77, 77, num_heads=2, num_kv_heads=2, window_left=0, window_right=0),
    # ... over MQA's one key head, in the band layout with each key tile's work in 2 parts
    # (Variant.kv_parts): parts take query tiles aligned on the sequence, and a key tile's
    # range starts 30 rows into one (right 30), rows before it that the band's sums do not
    # hold (fa2_fast_backward.wgsl, ffb_first_tile)
    Case(16, 200, 300, num_heads=4, num_kv_heads=1, window_left=90, window_right=30, smoke=True),
    # ... and past the range's end: an aligned tile's rows after it lie past the band's 128
    # rows of sequence 0's last key tile, on the first tile's rows of sequence 1, which runs
    # before it (126 keys: the two sequences' tiles adjacent in the scratch). Found on an
    # H100 by `explore` (varlen); there the rows of the next head or tile raced as well.
    Case(
        16,
        202,
        126,
        batch=2,
        num_heads=4,
        num_kv_heads=1,
        window_left=6,
        window_right=39,
        smoke=True,
    ),
    # ... with GQA and head_dim 62, in the fast backward's band layout, run twice: a second
    # case (after d18 and the band case with everything at once, below) for rows on 8-byte
    # boundaries read or added as whole vec4s (loads, Delta, dQ's and the band's sums), the
    # band's blocks placed by the KV heads, and its sums added onto the last run's where
    # stored (mutants.py)
    Case(
        62,
        300,
        130,
        num_heads=4,
        num_kv_heads=2,
        causal=True,
        bottom_right=True,
        window_left=37,
        smoke=True,
        repeat_backward=True,
    ),
    # softcap: moderate, and saturated by large logits (tanh' near 0 for most scores);
    # with everything else at once
    Case(64, 128, 217, softcap=2.5, smoke=True),
    Case(32, 17, 128, softcap=10.0, large_logits=True, smoke=True),
    # ... and 50 (Gemma 2's) over two visible keys a row (window (1, 0)), so that each
    # score's error moves O directly: tanh near 0 through exp, as lavapipe's and
    # SwiftShader's builtins compute it, errs by up to softcap x 1.4e-7 a score, and the
    # fast kernels that used the builtin failed here at 2.2-3.0x the bound
    Case(64, 100, 100, window_left=1, window_right=0, softcap=50.0, smoke=True),
    Case(
        59,
        203,
        113,
        batch=2,
        num_heads=6,
        num_kv_heads=2,
        causal=True,
        bottom_right=True,
        window_left=50,
        softcap=3.0,
        mask="keypad",
        dropout_p=0.17,
        # the fast backward's band layout with head_dim % 4 != 0 (its sums read float by
        # float) and two sequences whose key tiles meet inside a block of 64 (Sk = 113)
        smoke=True,
    ),
    # ALiBi (FlashAttention-2's slopes times |kj - qi - offset|): one slope per head, no
    # causal (both sides of the diagonal; the fast variant's wholly visible tiles), aligned
    # bottom-right (offset 90: swapping query and key changes the distance) over two batch
    # elements (the second's slopes at index h, not at b x H + h); per batch element,
    # causal bottom-right with Sq > Sk and GQA; with a (left, right) window, a softcap and
    # keys past the queries
    Case(64, 113, 203, batch=2, bottom_right=True, alibi="head", smoke=True),
    Case(
        59,
        203,
        113,
        batch=2,
        num_heads=6,
        num_kv_heads=2,
        causal=True,
        bottom_right=True,
        alibi="batch",
        smoke=True,
    ),
    Case(
        32,
        130,
        300,
        batch=2,
        bottom_right=True,
        window_left=20,
        window_right=7,
        softcap=5.0,
        alibi="batch",
    ),
    # head_dim over 128: the fast kernels split the output columns over two workgroups per
    # tile (fa2_fast_common.wgsl). The maximum with GQA and causal bottom-right; an odd
    # head_dim whose second block is partial (73 columns, rows not on a vec4); everything
    # at once
    Case(256, 77, 130, num_heads=4, num_kv_heads=2, causal=True, bottom_right=True, smoke=True),
    Case(201, 113, 70, num_heads=3, num_kv_heads=3, smoke=True),
    # ALiBi on wholly visible tiles, where the halves of fa2_fast_d256.wgsl's workgroups
    # each bias their own rows; and a last key tile one key short of whole (Sk = 64 + 63),
    # whose key past the end must stay masked
    Case(256, 130, 127, alibi="head", smoke=True),
    Case(
        256,
        130,
        300,
        batch=2,
        num_heads=2,
        num_kv_heads=1,
        window_left=20,
        window_right=7,
        softcap=5.0,
        alibi="batch",
        dropout_p=0.17,
    ),
    # Variable-length batches (FlashAttention-2's cu_seqlens), each sequence aligned
    # bottom-right on its own: causal GQA over sequences longer and shorter on either side
    # (the last, 130 queries over 64 keys, has a tile past its causal edge that the batch's
    # offset alone, without the sequence's alignment, puts before it), one without queries,
    # one without keys, one of a single query; a (left, right) window, a softcap,
    # per-sequence ALiBi slopes and dropout; the key-tile rounds of the fast
    # backward (4 slots over up to 5 key tiles, the second round reversed) over sequences of
    # 1 to 5 tiles; head_dim 256
    varlen(
        59,
        (77, 0, 130, 1, 130),
        (130, 5, 0, 64, 64),
        num_heads=6,
        num_kv_heads=2,
        causal=True,
        smoke=True,
    ),
    varlen(
        64,
        (113, 40, 200),
        (113, 300, 70),
        window_left=30,
        window_right=5,
        softcap=4.0,
        alibi="batch",
        dropout_p=0.17,
        smoke=True,
    ),
    # A short K (as in cross-attention), whose key tiles the fast backward splits into parts
    # (Variant.kv_parts: 2 parts of 9 query tiles here), in a variable-length batch with a
    # sequence without queries; GQA; head_dim 201 (two column blocks, the second partial,
    # rows not on a vec4; the dV pass and the dK/dQ pass)
    varlen(201, (330, 0, 77), (70, 5, 64), num_heads=6, num_kv_heads=2, smoke=True),
    varlen(8, (129, 17, 40), (257, 300, 64), num_heads=64, num_kv_heads=64, causal=True),
    varlen(256, (70, 129), (130, 33), num_heads=2, num_kv_heads=2, offset=3, causal=True),
    # ... and at sizes for GPUs: S = 4096 with MQA, 32768 rows per key; head_dim 256
    Case(64, 4096, 4096, num_heads=4, num_kv_heads=1, causal=True, long=True),
    Case(128, 1024, 256, num_heads=32, num_kv_heads=1, long=True),
    Case(256, 2048, 2048, num_heads=8, num_kv_heads=8, causal=True, long=True),
)

SMOKE: tuple[Case, ...] = tuple(c for c in CASES if c.smoke)


def select(*, smoke: bool = False, long: bool = False) -> tuple[Case, ...]:
    """The smoke subset, or the matrix; long cases only when asked for."""
    return tuple(c for c in (SMOKE if smoke else CASES) if long or not c.long)


class CaseIdError(ValueError):
    """An id that names no valid case: "case id '<id>': <reason>" from parse_id, "no case
    '<id>': <reason>" from by_id (which looked in the matrix first)."""

    def __init__(self, case_id: str, reason: str, *, lead: str = "case id") -> None:
        super().__init__(f"{lead} {case_id!r}: {reason}")
        self.case_id, self.reason = case_id, reason


# What parse_id reads, for its refusals.
ID_SYNTAX = (
    "an id is d<head_dim>-sq<seq_q>-sk<seq_k> (or vq<lens>-vk<lens>), then any of b<batch>, "
    "h<heads>|gqa<H>x<Hkv>|mqa<H>x1, causal, causal-br, br, off<n>, offn<n>, win<n>, wl<n>, "
    "wr<n>, cap<x>, alibi, alibi-b, mask-<kind>, drop<p>, big, shift"
)

_INT = "([0-9]{1,12})"  # 12 digits: past any limit, short of int()'s own (4300)
_DEC = r"([0-9]+(?:\.[0-9]+)?)"  # _decimal's form: no sign, no exponent
_LENS = r"([0-9]{1,12}(?:\.[0-9]{1,12})*)"


def _lens(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split("."))


# Each one-token part: (slot, prefix, pattern after the prefix, form, what it takes, the
# fields it sets from its groups). An id gives each slot once (h, gqa and mqa are one,
# off and offn one); alibi[-b] and mask-<kind> span tokens and are read apart.
_Fields = Callable[..., dict[str, object]]
_PARTS: tuple[tuple[str, str, re.Pattern[str], str, str, _Fields], ...] = tuple(
    (slot, prefix, re.compile(re.escape(prefix) + rest), form, takes, fields)
    for slot, prefix, rest, form, takes, fields in (
        ("d", "d", _INT, "d<head_dim>", "a whole number", lambda n: {"head_dim": int(n)}),
        ("sq", "sq", _INT, "sq<seq_q>", "a whole number", lambda n: {"seq_q": int(n)}),
        ("sk", "sk", _INT, "sk<seq_k>", "a whole number", lambda n: {"seq_k": int(n)}),
        ("vq", "vq", _LENS, "vq<lens>", "lengths joined by '.'", lambda t: {"lens_q": _lens(t)}),
        ("vk", "vk", _LENS, "vk<lens>", "lengths joined by '.'", lambda t: {"lens_k": _lens(t)}),
        ("b", "b", _INT, "b<batch>", "a whole number", lambda n: {"batch": int(n)}),
        ("heads", "h", _INT, "h<heads>", "a whole number", lambda n: {"num_heads": int(n)}),
        (
            "heads",
            "gqa",
            f"{_INT}x{_INT}",
            "gqa<H>x<Hkv>",
            "two whole numbers",
            lambda h, kv: {"num_heads": int(h), "num_kv_heads": int(kv)},
        ),
        (
            "heads",
            "mqa",
            f"{_INT}x1",
            "mqa<H>x1",
            "a whole number, then x1",
            lambda h: {"num_heads": int(h), "num_kv_heads": 1},
        ),
        ("causal", "causal", "", "causal", "nothing", lambda: {"causal": True}),
        ("br", "br", "", "br", "nothing", lambda: {"bottom_right": True}),
        (
            "off",
            "off",
            _INT,
            "off<n>",
            "a whole number (offn<n>: -n)",
            lambda n: {"offset": int(n)},
        ),
        ("off", "offn", _INT, "offn<n>", "a whole number", lambda n: {"offset": -int(n)}),
        ("win", "win", _INT, "win<n>", "a whole number", lambda n: {"window": int(n)}),
        ("wl", "wl", _INT, "wl<n>", "a whole number", lambda n: {"window_left": int(n)}),
        ("wr", "wr", _INT, "wr<n>", "a whole number", lambda n: {"window_right": int(n)}),
        ("cap", "cap", _DEC, "cap<x>", "a number like 2.5", lambda x: {"softcap": float(x)}),
        ("drop", "drop", _DEC, "drop<p>", "a number like 0.17", lambda p: {"dropout_p": float(p)}),
        ("big", "big", "", "big", "nothing", lambda: {"large_logits": True}),
        ("shift", "shift", "", "shift", "nothing", lambda: {"shifted_scores": True}),
    )
)

# Which part to name when the case or its config refuses a field.
_FIELD_SLOTS = {
    "head_dim": ("d",),
    "seq_q": ("sq", "vq"),
    "seq_k": ("sk", "vk"),
    "lens_q": ("vq",),
    "lens_k": ("vk",),
    "cu_seqlens_q": ("vq",),
    "cu_seqlens_k": ("vk",),
    "batch": ("b", "vq"),
    "num_heads": ("heads",),
    "num_kv_heads": ("heads",),
    "batch * num_heads": ("heads", "b", "vq"),
    "causal_offset": ("off", "br"),
    "window": ("win", "wl", "wr"),
    "window_left": ("wl",),
    "window_right": ("wr",),
    "softcap": ("cap",),
    "alibi": ("alibi",),
    "alibi_slopes": ("alibi",),
    "mask": ("mask",),
    "dropout_p": ("drop",),
}


def _read_part(case_id: str, tokens: list[str], i: int) -> tuple[str, str, dict[str, object], int]:
    """The part that starts at tokens[i]: (slot, its text, the fields it sets, the index of
    the next token)."""
    tok = tokens[i]
    if tok == "alibi":
        if tokens[i + 1 : i + 2] == ["b"]:
            return "alibi", "alibi-b", {"alibi": "batch"}, i + 2
        return "alibi", "alibi", {"alibi": "head"}, i + 1
    if tok == "mask":
        # kinds hold '-' (rows-inf): the longest that the next tokens spell
        for kind in sorted(MASK_KINDS[1:], key=len, reverse=True):
            words = kind.split("-")
            if tokens[i + 1 : i + 1 + len(words)] == words:
                return "mask", f"mask-{kind}", {"mask": kind}, i + 1 + len(words)
        part = "-".join(tokens[i : i + 2])
        kinds = ", ".join(f"mask-{k}" for k in MASK_KINDS[1:])
        raise CaseIdError(case_id, f"unknown mask {part!r}; masks: {kinds}")
    for slot, _, pattern, _, _, fields in _PARTS:
        if m := pattern.fullmatch(tok):
            return slot, tok, fields(*m.groups()), i + 1
    # A known prefix with a bad number after it (sqx, h4.5, off): say what it takes. A
    # one-letter prefix only before a digit, so that "bogus" is not read as b<batch>.
    prefixes = [
        (prefix, form, takes)
        for _, prefix, _, form, takes, _ in _PARTS
        if tok.startswith(prefix) and (len(prefix) > 1 or tok[1:2].isdigit())
    ]
    if prefixes:
        _, form, takes = max(prefixes, key=lambda p: len(p[0]))
        raise CaseIdError(case_id, f"bad part {tok!r}: {form} takes {takes}; {ID_SYNTAX}")
    raise CaseIdError(case_id, f"unknown part {tok!r}; {ID_SYNTAX}")


def parse_id(case_id: str) -> Case:
    """The case an id names: Case.id's inverse. For every case c, parse_id(c.id) has c's id
    and c's config (the seed aside, which no id holds); flags that no id holds (smoke, long,
    repeat_backward, check_dropout_fraction, seed) take their defaults, as do the heads (h4)
    where the id gives none. Parts may come in any order (by_id finds a matrix case
    written so), each once.

    Raises ValueError quoting the id and naming the first bad part, with what an id may
    hold; also where the parts make no valid case (gqa6x4: 6 heads over 4 KV heads), as
    Case or config.validate refuse it, naming the part and the field."""
    tokens = case_id.split("-")
    seen: dict[str, str] = {}  # slot -> the part that gave it
    fields: dict[str, object] = {}
    i = 0
    while i < len(tokens):
        slot, part, got, i = _read_part(case_id, tokens, i)
        if slot in seen:
            raise CaseIdError(
                case_id, f"part {part!r} repeats {seen[slot]!r} (each part once); {ID_SYNTAX}"
            )
        dense, var = {"sq", "sk", "b"} & seen.keys(), {"vq", "vk"} & seen.keys()
        if (slot in ("vq", "vk") and dense) or (slot in ("sq", "sk", "b") and var):
            other = next(seen[s] for s in seen if s in dense | var)
            raise CaseIdError(
                case_id,
                f"part {part!r} with {other!r}: a case is dense "
                f"(sq<seq_q>-sk<seq_k>, b<batch>) or variable-length (vq<lens>-vk<lens>, the "
                "batch their count), not both",
            )
        seen[slot] = part
        fields.update(got)
    needed = ["d"] + (["vq", "vk"] if {"vq", "vk"} & seen.keys() else ["sq", "sk"])
    for slot in needed:
        if slot not in seen:
            form = next(form for s, _, _, form, _, _ in _PARTS if s == slot)
            raise CaseIdError(case_id, f"missing {form}; {ID_SYNTAX}")
    try:
        if "vq" in seen:
            lens_q, lens_k = fields.pop("lens_q"), fields.pop("lens_k")
            case = varlen(fields.pop("head_dim"), lens_q, lens_k, **fields)  # type: ignore[arg-type]
        else:
            case = Case(**fields)  # type: ignore[arg-type]
        validate(case.config())
    except ConfigError as exc:
        part = next((seen[s] for s in _FIELD_SLOTS.get(exc.argument, ()) if s in seen), None)
        where = f"part {part!r}: " if part else ""
        raise CaseIdError(case_id, f"{where}{exc}") from None
    return case


_BY_ID: dict[str, Case] = {c.id: c for c in CASES}


def by_id(case_id: str) -> Case:
    """The matrix case of this id, with its flags (smoke, repeat_backward, ...); else the
    case the id names (parse_id), an ad-hoc one unless it is a matrix case written another
    way. ValueError for an id that names none, with the nearest matrix ids."""
    if (case := _BY_ID.get(case_id)) is not None:
        return case
    try:
        case = parse_id(case_id)
    except CaseIdError as exc:
        near = difflib.get_close_matches(case_id, _BY_ID, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise CaseIdError(case_id, f"{exc.reason}{hint}", lead="no case") from None
    return _BY_ID.get(case.id, case)


def with_seed(case: Case, seed: int) -> Case:
    return replace(case, seed=seed)


@dataclass(frozen=True)
class Found:
    """A case `py-harness explore` drew, on the input draw where a correct kernel failed
    because the rule was wrong (make_inputs(case, draw)); what showed it, and the fix."""

    case: Case
    draw: int
    what: str


FOUND: tuple[Found, ...] = (
    # Each dK and dV element sums 16 heads x 65 rows that cancel, and there are 374 of
    # them: compare.judge's bound from each element's own sum of |terms|
    Found(
        Case(1, 65, 187, num_heads=16, num_kv_heads=1, batch=2),
        3,
        "fast, lavapipe: dV 1.34x the baselines' bound; the sums of |terms| since",
    ),
    Found(
        Case(1, 65, 187, num_heads=16, num_kv_heads=1, batch=2, dropout_p=0.17),
        103,
        "fast, lavapipe: dK 2.03x the baselines' bound; the sums of |terms| since",
    ),
    # Dropout 0.9's keep scale makes the outputs ten times O(1): the floor at their scale
    # (compare.floor_at_scale)
    Found(
        Case(
            4,
            128,
            17,
            num_kv_heads=2,
            causal=True,
            bottom_right=True,
            softcap=10.0,
            mask="batch",
            dropout_p=0.9,
        ),
        283,
        "fast, lavapipe: dQ 1.29x the unscaled floor's bound; the floor at scale since",
    ),
    Found(
        Case(2, 159, 20, num_kv_heads=1, causal=True, mask="keypad", dropout_p=0.9),
        293,
        "fast, lavapipe: dV 1.22x the unscaled floor's bound; the floor at scale since",
    ),
)
