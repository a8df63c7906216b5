"""The case matrix: a control case plus targeted combinations with awkward sizes.

Not a full cross product. `smoke=True` marks the fast subset. Ids read like the case,
e.g. `d59-sq113-sk203-gqa6x2-causal`. Sizes are chosen for SwiftShader on 2 CPU cores
(about 0.15-0.8 GFLOP/s): the whole matrix is a few hundred MFLOP.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import AttentionConfig

MASK_KINDS = ("none", "full", "batch", "keypad", "rows-inf", "rows-1e30")


@dataclass(frozen=True)
class Case:
    head_dim: int
    seq_q: int
    seq_k: int
    num_heads: int = 4
    num_kv_heads: int = 4
    batch: int = 1
    causal: bool = False
    bottom_right: bool = False  # causal_offset = seq_k - seq_q
    window: int = 0
    mask: str = "none"
    dropout_p: float = 0.0
    seed: int = 1234
    smoke: bool = False
    repeat_backward: bool = False  # run backward twice; results must be bit-identical
    check_dropout_fraction: bool = False

    @property
    def id(self) -> str:
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
        if self.window:
            parts.append(f"win{self.window}")
        if self.mask != "none":
            parts.append(f"mask-{self.mask}")
        if self.dropout_p:
            parts.append(f"drop{self.dropout_p:g}")
        return "-".join(parts)

    def config(self) -> AttentionConfig:
        mask_shape = {
            "none": None,
            "full": (self.seq_q, self.seq_k),
            "batch": (self.batch, 1, self.seq_q, self.seq_k),
            "keypad": (self.batch, 1, 1, self.seq_k),
            "rows-inf": (self.batch, self.num_heads, self.seq_q, self.seq_k),
            "rows-1e30": (self.seq_q, self.seq_k),
        }[self.mask]
        return AttentionConfig(
            batch=self.batch,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            seq_q=self.seq_q,
            seq_k=self.seq_k,
            head_dim=self.head_dim,
            causal=self.causal,
            causal_offset=self.seq_k - self.seq_q if self.bottom_right else 0,
            window=self.window,
            mask_shape=mask_shape,
            dropout_p=self.dropout_p,
            seed=self.seed,
        )


CONTROL = Case(64, 128, 128, batch=2, smoke=True, repeat_backward=True)

CASES: tuple[Case, ...] = (
    CONTROL,
    # head_dim edges: 1 and 3 (partial vec4), 111 (odd), 128 (the maximum)
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
    Case(64, 130, 300, causal=True, bottom_right=True, window=40, smoke=True),
    # additive masks
    Case(64, 113, 203, mask="full"),
    Case(32, 59, 111, batch=2, mask="batch"),
    Case(64, 113, 203, batch=2, mask="keypad", smoke=True),
    Case(16, 59, 111, batch=2, mask="rows-inf", smoke=True),
    Case(16, 59, 111, mask="rows-1e30", causal=True),
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
    # at least 1024 keys
    Case(64, 64, 1031, num_heads=2, num_kv_heads=2, smoke=True),
)

SMOKE: tuple[Case, ...] = tuple(c for c in CASES if c.smoke)


def by_id(case_id: str) -> Case:
    for case in CASES:
        if case.id == case_id:
            return case
    raise KeyError(f"no case {case_id!r}; known: {[c.id for c in CASES]}")


def with_seed(case: Case, seed: int) -> Case:
    return replace(case, seed=seed)


# (adapter substring, case id) -> what is known. Measured, and strict: a listed case
# that passes fails the test, so the list cannot go stale.
KNOWN_FAILURES: dict[tuple[str, str], str] = {
    ("llvmpipe", "d111-sq203-sk113-mqa6x1"): (
        "Mesa 22.3.6 lavapipe (LLVM 15) returns wrong dK/dV from the seed's flash_bwd_dk_dv "
        "at head_dim 111 with 6 query heads over 1 KV head and 203 queries; the same WGSL "
        "through naga on SwiftShader, and through Tint in Chromium, passes"
    ),
}


def known_failure(adapter: str, case: Case) -> str | None:
    for (needle, case_id), why in KNOWN_FAILURES.items():
        if needle in adapter and case_id == case.id:
            return why
    return None
