"""Random cases: configurations nobody wrote down, for `py-harness explore`.

The matrix (cases.py) holds the cases someone thought of; a kernel's bug can sit where
nobody looked. `random_case` draws any configuration a variant supports, with sizes near
the fast kernels' tile edges (multiples of 16, 32, 64) half the time, and every axis the
variant declares: GQA/MQA up to 64 heads, causal with top-left, bottom-right or explicit
(negative too) offsets, symmetric and (left, right) windows, softcap, ALiBi, additive
masks, dropout, variable-length batches with empty sequences, large logits, a repeated
backward. What the variant does not support is drawn again, never run: a draw is a case
the variant must pass.

Each draw is numpy's default_rng((seed, index)): draw `index` of `seed` is the same case
whatever came before it, so one failure replays alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...config import AttentionConfig, ConfigError, validate
from .cases import ALIBI_KINDS, MASK_KINDS, Case, varlen

# Lengths and head dims where tiles, vec4s and halves begin and end.
EDGE_LENGTHS = (1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 193)
EDGE_HEAD_DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256)
KV_HEADS = (1, 1, 2, 3, 4, 8, 16, 32)
GROUPS = (1, 1, 2, 3, 4, 5, 8, 16)  # query heads per kv head
MAX_HEADS = 64
ATTEMPTS = 1000  # draws before giving up on a variant that supports almost nothing


def work(cfg: AttentionConfig) -> int:
    """Score elements times head_dim over the batch: what a forward costs, up to a factor."""
    if cfg.cu_seqlens_q is not None:
        qs, ks = np.diff(cfg.cu_seqlens_q), np.diff(cfg.cu_seqlens_k)
        pairs = int(np.dot(qs, ks))
    else:
        pairs = cfg.batch * cfg.seq_q * cfg.seq_k
    return pairs * cfg.num_heads * max(cfg.head_dim, 32)


def random_case(
    seed: int, index: int, *, refusal, max_len: int = 200, max_work: int = 20_000_000
) -> Case:
    """Draw `index` of `seed`: a valid case that `refusal(cfg)` (the variant's: a reason,
    or None where it runs the configuration) accepts and that costs at most `max_work`
    (`work`); lengths at most `max_len`."""
    rng = np.random.default_rng((seed, index))
    for _ in range(ATTEMPTS):
        case = _draw(rng, max_len)
        try:
            cfg = case.config()
            validate(cfg)
        except ConfigError:
            continue
        if work(cfg) <= max_work and refusal(cfg) is None:
            # Drawn apart, so that the draws made before this axis existed stay the same
            shift = _maybe(np.random.default_rng((seed, index, 1)), 0.1)
            return dataclasses.replace(case, shifted_scores=shift)
    raise ValueError(
        f"--max-work / --max-len: no case in {ATTEMPTS} draws that the variant runs within "
        f"{max_work} (batch x heads x Sq x Sk x max(head_dim, 32)) and {max_len} rows"
    )


def case_literal(case: Case) -> str:
    """The case as Python that makes it (cases.py's form): the fields that differ from
    their defaults, e.g. Case(56, 26, 26, num_heads=16, num_kv_heads=1, causal=True)."""
    fields = dataclasses.fields(Case)
    args = [repr(getattr(case, f.name)) for f in fields[:3]]
    args += [
        f"{f.name}={getattr(case, f.name)!r}"
        for f in fields[3:]
        if getattr(case, f.name) != f.default
    ]
    return f"Case({', '.join(args)})"


def _length(rng: np.random.Generator, most: int) -> int:
    edges = [n for n in EDGE_LENGTHS if n <= most]
    if edges and rng.random() < 0.5:
        return int(rng.choice(edges))
    return int(rng.integers(1, most + 1))


def _maybe(rng: np.random.Generator, p: float) -> bool:
    return bool(rng.random() < p)


def _draw(rng: np.random.Generator, max_len: int) -> Case:
    edge = _maybe(rng, 0.6)
    head_dim = int(rng.choice(EDGE_HEAD_DIMS)) if edge else int(rng.integers(1, 257))
    kv = int(rng.choice(KV_HEADS))
    heads = min(kv * int(rng.choice(GROUPS)), MAX_HEADS)
    heads -= heads % kv
    kw: dict = {"num_heads": heads, "num_kv_heads": kv}
    if _maybe(rng, 0.5):
        kw["causal"] = True
        how = rng.integers(3)
        if how == 1:
            kw["bottom_right"] = True
        elif how == 2:
            kw["offset"] = int(rng.integers(-40, 41))
    if _maybe(rng, 0.35):
        if _maybe(rng, 0.4):
            kw["window"] = _length(rng, max_len)
        else:
            bounds = (-1, 0, 0, _length(rng, 40), _length(rng, max_len))
            kw["window_left"] = int(rng.choice(bounds))
            kw["window_right"] = int(rng.choice(bounds))
    if _maybe(rng, 0.25):
        kw["softcap"] = float(rng.choice((0.5, 1.0, 3.0, 10.0, 30.0)))
    if _maybe(rng, 0.25):
        kw["alibi"] = str(rng.choice(ALIBI_KINDS[1:]))
    if _maybe(rng, 0.25):
        kw["dropout_p"] = float(rng.choice((0.1, 0.17, 0.5, 0.9)))
        kw["seed"] = int(rng.integers(0, 2**32))
    kw["large_logits"] = _maybe(rng, 0.1)
    kw["repeat_backward"] = _maybe(rng, 0.25)
    if _maybe(rng, 0.3):
        # a variable-length batch: 1-6 sequences, some empty on one side or both
        n = int(rng.integers(1, 7))
        lens = [
            (
                0 if _maybe(rng, 0.1) else _length(rng, max_len),
                0 if _maybe(rng, 0.1) else _length(rng, max_len),
            )
            for _ in range(n)
        ]
        lens_q, lens_k = (tuple(x) for x in zip(*lens, strict=True))
        return varlen(head_dim, lens_q, lens_k, **kw)
    if _maybe(rng, 0.3):
        kw["mask"] = str(rng.choice(MASK_KINDS[1:]))
    batch = 1 if _maybe(rng, 0.6) else int(rng.integers(2, 4))
    return Case(head_dim, _length(rng, max_len), _length(rng, max_len), batch=batch, **kw)
