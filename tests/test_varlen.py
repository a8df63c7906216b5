"""Variable-length batches (FlashAttention-2's cu_seqlens): the configuration's checks, the
judge's reference against an independent formulation, and the kernels against their own
dense batches, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from py_harness.config import (
    VARLEN_MAX_BATCH,
    AttentionConfig,
    ConfigError,
    cu_seqlens,
    pack_seqlens,
    validate,
)
from py_harness.host.judge.cases import Case, varlen
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.judge.reference import EMPTY_LSE, attention_bwd_ref, attention_ref
from py_harness.host.judge.verdict import references
from py_harness.host.runtimes.sessions import Session
from py_harness.host.variants import refusal
from py_harness.host.wire import run_on


def _cfg(**kw: object) -> AttentionConfig:
    base: dict[str, object] = {
        "batch": 3,
        "num_heads": 2,
        "seq_q": 7,
        "seq_k": 9,
        "head_dim": 8,
        "cu_seqlens_q": (0, 7, 7, 10),
        "cu_seqlens_k": (0, 2, 11, 11),
    }
    return AttentionConfig(**(base | kw))  # type: ignore[arg-type]


def test_shapes_and_sequences() -> None:
    cfg = _cfg()
    validate(cfg)
    assert cfg.shapes()["q"] == (10, 2, 8) and cfg.shapes()["k"] == (11, 2, 8)
    assert cfg.shapes()["lse"] == (2, 10)
    assert cfg.sequences() == [(0, 7, 0, 2), (7, 0, 2, 9), (7, 3, 11, 0)]
    # each sequence aligned bottom-right on its own, plus causal_offset
    assert [cfg.sequence_offset(q, k) for _, q, _, k in cfg.sequences()] == [-5, 9, -3]
    words = np.frombuffer(pack_seqlens(cfg), np.uint32).reshape(-1, 4)
    assert words.shape == (VARLEN_MAX_BATCH, 4)
    assert words[:4].tolist() == [[0, 0, 7, 2], [7, 2, 0, 9], [7, 11, 3, 0], [0, 0, 0, 0]]
    assert not np.frombuffer(pack_seqlens(AttentionConfig(2, 2, 5, 5, 8)), np.uint32).any()


@pytest.mark.parametrize(
    ("kw", "argument", "words"),
    [
        ({"cu_seqlens_k": None}, "cu_seqlens_k", "needs both"),
        ({"cu_seqlens_q": (0, 7, 10)}, "cu_seqlens_q", "batch + 1 = 4"),
        ({"cu_seqlens_q": [0, 7, 7, 10]}, "cu_seqlens_q", "tuple"),
        ({"cu_seqlens_q": (1, 7, 7, 10)}, "cu_seqlens_q", "start at 0"),
        ({"cu_seqlens_k": (0, 2, 1, 11)}, "cu_seqlens_k", "must not decrease"),
        ({"cu_seqlens_k": (0, 2, 11.0, 11)}, "cu_seqlens_k", "entry 2 must be an int"),
        ({"seq_q": 8}, "seq_q", "longest sequence of cu_seqlens_q (max_seqlen: 7)"),
        ({"seq_k": 8}, "seq_k", "max_seqlen: 9"),
        ({"mask_shape": (7, 9)}, "mask", "not with a variable-length batch"),
    ],
)
def test_refusals_name_the_argument(kw: dict, argument: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(_cfg(**kw))
    assert err.value.argument == argument and words in str(err.value)


def test_too_many_sequences_refused() -> None:
    n = VARLEN_MAX_BATCH + 1
    cfg = AttentionConfig(
        n, 1, 1, 1, 8, cu_seqlens_q=cu_seqlens([1] * n), cu_seqlens_k=cu_seqlens([1] * n)
    )
    with pytest.raises(ConfigError, match=f"batch: must be in \\[1, {VARLEN_MAX_BATCH}\\]"):
        validate(cfg)


def _block_diagonal(case: Case, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The packed batch as ONE dense sequence of total_q queries and total_k keys, each
    sequence's visibility and ALiBi bias written into an additive mask that is -inf across
    sequences: a formulation of varlen attention that shares nothing with the per-sequence
    split the judge makes. float64 reference; LSE [H, total_q]."""
    cfg = case.config()
    h, tq, tk = cfg.num_heads, cfg.total_q, cfg.total_k
    mask = np.full((h, tq, tk), -np.inf)
    slopes = x.get("alibi_slopes")
    left = cfg.window_left if cfg.window_left >= 0 else tk + tq
    right = cfg.window_right if cfg.window_right >= 0 else tk + tq
    if cfg.causal:
        right = min(right, 0)
    for b, (q0, len_q, k0, len_k) in enumerate(cfg.sequences()):
        qa = np.arange(len_q)[:, None] + cfg.sequence_offset(len_q, len_k)
        dist = np.arange(len_k)[None, :] - qa
        visible = (dist >= -left) & (dist <= right)
        bias = np.zeros((h, 1, 1))
        if slopes is not None:
            bias = slopes.reshape(-1, h)[b if slopes.ndim == 2 else 0].reshape(h, 1, 1)
        block = np.where(visible, -bias * np.abs(dist), -np.inf)
        mask[:, q0 : q0 + len_q, k0 : k0 + len_k] = block
    kw = {"mask": mask[None].astype(np.float32), "softcap": cfg.softcap, "scale": cfg.scale}
    one = {n: x[n][None] for n in ("q", "k", "v", "d_out")}
    o, lse = attention_ref(one["q"], one["k"], one["v"], **kw)
    dq, dk, dv = attention_bwd_ref(one["q"], one["k"], one["v"], None, one["d_out"], **kw)
    return {"o": o[0], "lse": lse[0], "dq": dq[0], "dk": dk[0], "dv": dv[0]}


@pytest.mark.parametrize(
    "case",
    [
        varlen(16, (5, 0, 9, 1), (9, 3, 0, 4), num_heads=4, num_kv_heads=2, causal=True),
        varlen(8, (6, 11), (11, 6), offset=2, window_left=3, window_right=1, softcap=2.0),
        varlen(12, (7, 4, 10), (3, 8, 10), num_heads=2, num_kv_heads=2, causal=True, alibi="batch"),
        varlen(8, (3, 3), (5, 5), num_heads=3, num_kv_heads=1, alibi="head"),
    ],
    ids=lambda c: c.id,
)
def test_reference_is_the_block_diagonal_dense_attention(case: Case) -> None:
    # The mask's f32 rounding of the ALiBi bias is the reference's own (alibi_bias rounds
    # the f32 slopes' product in float64): compare within a few float64 ulps of f32.
    x = make_inputs(case)
    got = references(case.config(), x, np.float64)
    want = _block_diagonal(case, x)
    assert set(got) == set(want)
    for name in want:
        assert got[name].shape == want[name].shape, name
        empty = want[name] == EMPTY_LSE
        assert np.array_equal(got[name] == EMPTY_LSE, empty), name
        np.testing.assert_allclose(got[name][~empty], want[name][~empty], rtol=1e-6, atol=1e-6)


@pytest.mark.browser
def test_equal_lengths_are_the_dense_batch_bit_for_bit(harness: Session, variant: str) -> None:
    """A varlen batch of equal sequences is the dense batch packed ([B, S] rows as one axis,
    the LSE [H, B x S]): the kernels must give the same bits both ways. The dense batch's
    offset is the varlen one plus len_k - len_q (varlen aligns each sequence bottom-right)."""
    dense = Case(59, 77, 130, batch=3, num_heads=4, num_kv_heads=2, causal=True, offset=60)
    packed = varlen(59, (77,) * 3, (130,) * 3, num_heads=4, num_kv_heads=2, causal=True, offset=7)
    cfg_d, cfg_p = dense.config(), packed.config()
    assert cfg_p.sequence_offset(77, 130) == cfg_d.causal_offset
    why = refusal(variant, cfg_p)
    if why:
        pytest.skip(why)
    x = make_inputs(dense)
    xp = {n: a.reshape(-1, *a.shape[2:]) for n, a in x.items()}
    got_d = run_on(harness, cfg_d, x, variant=variant)["arrays"]
    got_p = run_on(harness, cfg_p, xp, variant=variant)["arrays"]
    for name in ("o", "dq", "dk", "dv"):
        assert np.array_equal(got_d[name].reshape(got_p[name].shape), got_p[name]), name
    lse_d = got_d["lse"].transpose(1, 0, 2).reshape(cfg_p.num_heads, -1)  # [B,H,S] -> [H,BS]
    assert np.array_equal(lse_d, got_p["lse"])
