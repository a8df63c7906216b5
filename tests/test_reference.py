"""Checks of the NumPy attention reference (py_harness/host/judge/reference.py) itself.

(a) its backward is the derivative of its forward (central differences, float64);
(b) it agrees with a per-row loop that uses the softmax Jacobian diag(p) - p p^T;
(c, d) empty rows and the -1e30 threshold; (e) float32 path close to float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from py_harness.host.judge import cases as matrix
from py_harness.host.judge.dropout import dropout_multiplier
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.judge.reference import (
    EMPTY_LSE,
    attention_bwd_ref,
    attention_ref,
    attention_term_sums,
    visible_mask,
)

# Any NumPy warning (e.g. inf - inf in a fully masked row) fails the test.
pytestmark = pytest.mark.filterwarnings("error")
RAISE = dict(divide="raise", over="raise", invalid="raise")  # underflow in exp is legitimate


def _mask(b, sq, sk, rng):
    """[B, 1, Sq, Sk] float32 mask: row (0, 1) all -inf, row (1, 3) all -1e30, a few holes."""
    m = rng.standard_normal((b, 1, sq, sk)).astype(np.float32)
    m[0, 0, 1, :] = -np.inf
    m[-1, 0, min(3, sq - 1), :] = -1e30
    m[0, 0, 0, 1] = -np.inf
    m[-1, 0, 0, 2] = -1e30
    return m


# (B, Sq, Sk, H, Hkv, D, kwargs); "mask" is filled in by _case.
ALL = dict(mask=True, causal=True, causal_offset=2, window=4, dropout_p=0.3, seed=99)
CASES = {
    "plain": (1, 3, 4, 2, 2, 3, {}),
    "gqa_causal_offset": (2, 4, 6, 4, 2, 4, dict(causal=True, causal_offset=2)),
    "window": (1, 5, 7, 4, 2, 5, dict(window=3, causal_offset=1, scale=0.7)),
    "causal_window": (1, 5, 5, 2, 1, 3, dict(causal=True, window=2, causal_offset=1)),
    "mask": (2, 4, 5, 4, 2, 4, dict(mask=True)),
    "dropout": (2, 5, 6, 4, 2, 4, dict(causal=True, dropout_p=0.3, seed=1234)),
    "all": (2, 5, 7, 4, 2, 5, ALL),
    "mqa_mask_2d": (1, 4, 4, 3, 1, 3, dict(mask="2d", dropout_p=0.5, seed=7)),
    # FlashAttention-2's axes: bottom-right causal with Sq > Sk (rows 0-2 see no key),
    # (left, right) windows, softcap (small enough to bend the scores), all at once
    "bottom_right": (1, 6, 3, 2, 1, 3, dict(causal=True, causal_offset=-3)),
    "window_lr": (1, 5, 7, 2, 2, 4, dict(window_left=1, window_right=2, causal_offset=1)),
    "softcap": (2, 4, 5, 4, 2, 4, dict(softcap=0.8, scale=1.5)),
    # ALiBi: one slope per head on both sides of the diagonal; per batch element and head,
    # causal bottom-right ("alibi" is filled in by _case)
    "alibi": (1, 4, 6, 2, 1, 3, dict(alibi="head", causal_offset=1)),
    "alibi_batch": (2, 5, 3, 4, 2, 3, dict(alibi="batch", causal=True, causal_offset=-2)),
    "feature_axes": (
        2,
        6,
        4,
        4,
        2,
        3,
        dict(
            mask=True,
            causal=True,
            causal_offset=-1,
            window_left=2,
            softcap=1.1,
            alibi="batch",
            dropout_p=0.3,
        ),
    ),
}


def _case(name, seed=0):
    b, sq, sk, h, hkv, d, kw = CASES[name]
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, sq, h, d))
    k, v = rng.standard_normal((2, b, sk, hkv, d))
    d_out = rng.standard_normal((b, sq, h, d))
    kw = dict(kw)
    if kw.get("mask") is True:
        kw["mask"] = _mask(b, sq, sk, rng)
    elif kw.get("mask") == "2d":
        kw["mask"] = _mask(1, sq, sk, rng)[0, 0]
    if "alibi" in kw:  # slopes up to 1: a distance of a few keys moves a score by units
        shape = (h,) if kw.pop("alibi") == "head" else (b, h)
        kw["alibi_slopes"] = rng.uniform(0, 1, shape).astype(np.float32)
    return q, k, v, d_out, kw


def _loop_reference(
    q,
    k,
    v,
    d_out,
    *,
    mask=None,
    causal=False,
    causal_offset=0,
    window=0,
    window_left=-1,
    window_right=-1,
    softcap=0.0,
    alibi_slopes=None,
    dropout_p=0.0,
    seed=0,
    scale=None,
    term_sums=None,
):
    """Row-by-row attention and its gradient through the explicit softmax Jacobian (and
    the softcap's derivative, 1 - tanh^2, per key); ALiBi as -slope * |j - qa| per key.
    term_sums: a dict to fill with each output's sum of |terms| (o, dq, dk, dv)."""
    b_, sq, h_, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = float(np.float32(1 / math.sqrt(d) if scale is None else scale))
    mask = np.zeros((b_, h_, sq, sk)) if mask is None else np.broadcast_to(mask, (b_, h_, sq, sk))
    mult = dropout_multiplier(dropout_p, seed, b_, h_, sq, sk)
    o, dq = np.zeros_like(q), np.zeros_like(q)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    lse = np.full((b_, h_, sq), EMPTY_LSE)
    sums = {"o": np.zeros_like(q), "dq": np.zeros_like(q), "dk": np.zeros_like(k)}
    sums["dv"] = np.zeros_like(v)
    for b in range(b_):
        for h in range(h_):
            g = h // (h_ // hkv)
            for i in range(sq):
                qa = i + causal_offset
                keys = [
                    j
                    for j in range(sk)
                    if not (causal and j > qa)
                    and not (window > 0 and abs(qa - j) >= window)
                    and not (window_left >= 0 and j < qa - window_left)
                    and not (window_right >= 0 and j > qa + window_right)
                ]
                x = np.array([scale * q[b, i, h] @ k[b, j, g] for j in keys])
                cap = float(np.float32(softcap))
                bend = np.ones_like(x) if not softcap else 1 - np.tanh(x / cap) ** 2
                capped = x if not softcap else cap * np.tanh(x / cap)
                slope = 0.0
                if alibi_slopes is not None:
                    slope = float(alibi_slopes[h] if alibi_slopes.ndim == 1 else alibi_slopes[b, h])
                bias = np.array([-slope * abs(j - qa) for j in keys])
                s = capped + bias + np.array([mask[b, h, i, j] for j in keys])
                bend = bend[s > -1e30]
                keys = [j for j, sj in zip(keys, s, strict=True) if sj > -1e30]
                s = s[s > -1e30]
                if not keys:
                    continue
                lse[b, h, i] = s.max() + math.log(np.exp(s - s.max()).sum())
                p = np.exp(s - lse[b, h, i])
                m = mult[b, h, i, keys]
                o[b, i, h] = (p * m) @ v[b, keys, g]
                dp = m * (v[b, keys, g] @ d_out[b, i, h])  # dLoss/dP_j
                ds = bend * ((np.diag(p) - np.outer(p, p)) @ dp)  # dLoss/dx_j
                dq[b, i, h] = scale * ds @ k[b, keys, g]
                dk[b, keys, g] += scale * np.outer(ds, q[b, i, h])
                dv[b, keys, g] += np.outer(p * m, d_out[b, i, h])
                sums["o"][b, i, h] = (p * m) @ abs(v[b, keys, g])
                sums["dq"][b, i, h] = scale * abs(ds) @ abs(k[b, keys, g])
                sums["dk"][b, keys, g] += scale * np.outer(abs(ds), abs(q[b, i, h]))
                sums["dv"][b, keys, g] += np.outer(p * m, abs(d_out[b, i, h]))
    if term_sums is not None:
        term_sums.update(sums)
    return o, lse, dq, dk, dv


@pytest.mark.parametrize("name", CASES)
def test_backward_matches_finite_differences(name):
    q, k, v, d_out, kw = _case(name)
    o, _ = attention_ref(q, k, v, **kw)
    grads = attention_bwd_ref(q, k, v, o, d_out, **kw)
    args, eps = [q, k, v], 1e-6
    for which, grad in enumerate(grads):
        num = np.zeros_like(grad)
        for idx in np.ndindex(grad.shape):
            loss = []
            for sign in (1, -1):
                pert = [a.copy() for a in args]
                pert[which][idx] += sign * eps
                loss.append(np.sum(attention_ref(*pert, **kw)[0] * d_out))
            num[idx] = (loss[0] - loss[1]) / (2 * eps)
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-8, err_msg="qkv"[which])


@pytest.mark.parametrize("name", CASES)
def test_matches_row_loop_with_explicit_jacobian(name):
    q, k, v, d_out, kw = _case(name, seed=1)
    want = _loop_reference(q, k, v, d_out, **kw)
    o, lse = attention_ref(q, k, v, **kw)
    got = (o, lse, *attention_bwd_ref(q, k, v, o, d_out, **kw))
    for label, g, w in zip(("o", "lse", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=label)


@pytest.mark.parametrize("name", CASES)
def test_term_sums_match_row_loop(name):
    """The sums of |terms| that bound a long, cancelling element (compare.judge)."""
    q, k, v, d_out, kw = _case(name, seed=2)
    want = {}
    _loop_reference(q, k, v, d_out, **kw, term_sums=want)
    got = attention_term_sums(q, k, v, d_out, **kw)
    assert got.keys() == want.keys()
    for label in want:
        np.testing.assert_allclose(got[label], want[label], rtol=1e-12, atol=1e-12, err_msg=label)
        assert (got[label] >= 0).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_empty_rows_are_zero_without_warnings(dtype):
    q, k, v, d_out, kw = _case("all", seed=2)
    kw["mask"][1, 0, 2, :] = -np.inf  # one more empty row, inside the visible region
    with np.errstate(**RAISE):
        o, lse = attention_ref(q, k, v, **kw, dtype=dtype)
        dq, dk, dv = attention_bwd_ref(q, k, v, o, d_out, **kw, dtype=dtype)
        for x in (o, lse, dq, dk, dv):
            assert x.dtype == dtype and np.isfinite(x).all()
        for b, i in [(0, 1), (1, 3), (1, 2)]:  # -inf row, -1e30 row, -inf row
            assert (o[b, i] == 0).all() and (dq[b, i] == 0).all()
            assert (lse[b, :, i] == dtype(EMPTY_LSE)).all()
            # Such a row contributes nothing to dk / dv, whatever its q and dO are.
            q2, do2 = q.copy(), d_out.copy()
            q2[b, i], do2[b, i] = 123.0, -77.0
            _, dk2, dv2 = attention_bwd_ref(q2, k, v, o, do2, **kw, dtype=dtype)
            np.testing.assert_allclose(dk2, dk, rtol=1e-6, atol=0)
            np.testing.assert_allclose(dv2, dv, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    "sq, sk, kw",
    [
        (3, 4, dict(mask=np.full((3, 4), -np.inf, np.float32))),  # everything masked
        (5, 4, dict(window=2, causal_offset=3)),  # rows 2.. see no key at all (qa >= Sk + 1)
        (3, 0, dict(dropout_p=0.2)),
        (6, 3, dict(causal=True, causal_offset=-3, softcap=2.0)),  # bottom-right, rows 0-2
    ],  # no keys
)
def test_fully_empty_inputs(sq, sk, kw):
    rng = np.random.default_rng(3)
    q, d_out = rng.standard_normal((2, 1, sq, 2, 4))
    k, v = rng.standard_normal((2, 1, sk, 1, 4))
    with np.errstate(**RAISE):
        o, lse = attention_ref(q, k, v, **kw)
        dq, dk, dv = attention_bwd_ref(q, k, v, o, d_out, **kw)
    rules = ("window", "causal_offset", "causal")
    empty = ~visible_mask(sq, sk, **{x: kw[x] for x in kw if x in rules})
    empty = empty.all(1) | ("mask" in kw)
    assert (o[:, empty] == 0).all() and (dq[:, empty] == 0).all()
    assert (lse[..., empty] == EMPTY_LSE).all() and empty.any()
    assert np.isfinite(dk).all() and np.isfinite(dv).all()


def test_minus_1e30_is_masked_but_just_above_is_not():
    q, k, v, d_out, _ = _case("plain", seed=4)
    hole = np.zeros((3, 4), np.float32)
    hole[1, 2] = -1e30
    excluded = hole.copy()
    excluded[1, 2] = -np.inf
    a = attention_ref(q, k, v, mask=hole)
    b = attention_ref(q, k, v, mask=excluded)
    for x, y in zip(
        a + attention_bwd_ref(q, k, v, a[0], d_out, mask=hole),
        b + attention_bwd_ref(q, k, v, b[0], d_out, mask=excluded),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    # A row of -9e29 is present: its dot products vanish against 9e29, so the
    # softmax is uniform over its 4 keys (PyTorch treats -1e30 like this; we do not).
    row = np.zeros((3, 4), np.float32)
    row[2] = -9e29
    o, lse = attention_ref(q, k, v, mask=row)
    np.testing.assert_allclose(o[:, 2], v.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(lse[..., 2], np.float32(-9e29) + math.log(4), rtol=1e-15)


@pytest.mark.parametrize("name", ["all", "gqa_causal_offset", "mqa_mask_2d"])
def test_float32_path_close_to_float64(name):
    q, k, v, d_out, kw = _case(name, seed=5)
    o64, lse64 = attention_ref(q, k, v, **kw)
    o32, lse32 = attention_ref(q, k, v, **kw, dtype=np.float32)
    g64 = attention_bwd_ref(q, k, v, o64, d_out, **kw)
    g32 = attention_bwd_ref(q, k, v, o32, d_out, **kw, dtype=np.float32)
    for x32, x64 in zip((o32, lse32, *g32), (o64, lse64, *g64), strict=True):
        assert x32.dtype == np.float32
        np.testing.assert_allclose(x32, x64, rtol=1e-5, atol=1e-5)


def test_visible_mask_and_mask_broadcasting():
    want = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0]], bool)
    got = visible_mask(3, 5, causal=True, causal_offset=1, window=2)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(visible_mask(2, 3, window=2), [[1, 1, 0], [1, 1, 1]])
    q, k, v, _, _ = _case("gqa_causal_offset", seed=6)  # B=2, Sq=4, Sk=6, H=4
    m = np.random.default_rng(6).standard_normal((2, 4, 4, 6)).astype(np.float32)
    for small in (m[0, 0, 0], m[0, 0], m[:1, 1:2], m[:, :, :1], m[:1, :, :, :1]):
        full = np.broadcast_to(small, m.shape)
        for x, y in zip(
            attention_ref(q, k, v, mask=small), attention_ref(q, k, v, mask=full), strict=True
        ):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError):
        attention_ref(q, k, v, mask=m[None])


def test_shifted_scores_leave_softmax_and_gradients_and_pass_exps_range():
    """Case.shifted_scores: rows whose max lies past exp's float32 range both ways, and the
    float64 reference the same as without the shift, but for the LSE, which moves by it."""
    shifted = next(c for c in matrix.CASES if c.shifted_scores)
    x = make_inputs(shifted)
    # Less any vector common to every key (here their mean, the shift's vector with it),
    # each row's scores move by one amount: softmax, O and the gradients stay
    x0 = {**x, "k": x["k"] - x["k"].mean(axis=(0, 1, 2))}
    cfg = shifted.config()
    kw = {"causal": cfg.causal, "scale": cfg.softmax_scale}
    o, lse = attention_ref(x["q"], x["k"], x["v"], **kw)
    o0, lse0 = attention_ref(x0["q"], x0["k"], x0["v"], **kw)
    shift = lse - lse0
    assert (shift > 88.8).any() and (shift < -88.8).any(), (shift.min(), shift.max())
    np.testing.assert_allclose(o, o0, rtol=0, atol=1e-9)
    grads = attention_bwd_ref(x["q"], x["k"], x["v"], o, x["d_out"], **kw)
    grads0 = attention_bwd_ref(x0["q"], x0["k"], x0["v"], o0, x0["d_out"], **kw)
    for g, g0 in zip(grads, grads0, strict=True):
        np.testing.assert_allclose(g, g0, rtol=0, atol=1e-9 * np.abs(g0).max())
