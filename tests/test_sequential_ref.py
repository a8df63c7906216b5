"""The judge's second baseline (py_harness/host/judge/sequential_ref.py): FlashAttention-2 in
float32 that adds one term at a time. It must compute the same function as the float64
reference, sum in the order a kernel's loop does, and be as inaccurate as such a loop on
long reductions (that is why it exists)."""

from __future__ import annotations

import numpy as np
import pytest

from py_harness.host.judge.reference import EMPTY_LSE, attention_bwd_ref, attention_ref
from py_harness.host.judge.sequential_ref import attention_seq32, exp32, log32, seq_matmul

pytestmark = pytest.mark.filterwarnings("error")
NAMES = ("o", "lse", "dq", "dk", "dv")


def _inputs(b, sq, sk, h, hkv, d, seed=0):
    rng = np.random.default_rng(seed)
    q, d_out = rng.standard_normal((2, b, sq, h, d), dtype=np.float32)
    k, v = rng.standard_normal((2, b, sk, hkv, d), dtype=np.float32)
    return q, k, v, d_out


def _ref64(q, k, v, d_out, **kw):
    o, lse = attention_ref(q, k, v, **kw)
    return dict(zip(NAMES, (o, lse, *attention_bwd_ref(q, k, v, None, d_out, **kw)), strict=True))


SLOPES = np.random.default_rng(2).uniform(0, 0.5, (2, 4)).astype(np.float32)


@pytest.mark.parametrize(
    "kw",
    [
        dict(causal=True, causal_offset=3, window=6, dropout_p=0.25, seed=11),
        # FlashAttention-2's axes: bottom-right (rows 0-1 see no key), a (left, right)
        # window, softcap and ALiBi per batch element
        dict(causal_offset=-2, window_left=5, window_right=1, softcap=2.0, alibi_slopes=SLOPES),
    ],
    ids=["seed-axes", "fa2-axes"],
)
def test_same_function_as_the_float64_reference(kw):
    q, k, v, d_out = _inputs(2, 9, 13, 4, 2, 5)
    mask = np.random.default_rng(1).standard_normal((2, 1, 9, 13)).astype(np.float32)
    mask[1, 0, 3] = -np.inf  # an empty row
    mask[0, 0, 2, :7] = -1e30
    kw = dict(kw, mask=mask)
    ref, seq = _ref64(q, k, v, d_out, **kw), attention_seq32(q, k, v, d_out, **kw)
    for n in NAMES:
        assert seq[n].dtype == np.float32 and seq[n].shape == ref[n].shape, n
        live = ref[n] < 1e38
        scale = np.abs(ref[n][live]).max()
        assert np.abs(seq[n][live] - ref[n][live]).max() <= 1e-5 * scale, n
    assert (seq["lse"][1, :, 3] == np.float32(EMPTY_LSE)).all()
    assert not seq["o"][1, 3].any() and not seq["dq"][1, 3].any()


def test_sums_one_term_at_a_time_in_kernel_order():
    # One key: every P is exactly 1, so dV of KV head j is dO summed over the query heads
    # of its group, head by head, row by row: a plain float32 loop, bit for bit.
    q, k, v, d_out = _inputs(1, 40, 1, 6, 2, 3, seed=2)
    dv = attention_seq32(q, k, v, d_out)["dv"]
    for kvh in range(2):
        acc = np.zeros(3, np.float32)
        for h in range(3 * kvh, 3 * kvh + 3):
            for i in range(40):
                acc = acc + d_out[0, i, h]
        assert np.array_equal(dv[0, 0, kvh], acc)
    a = np.float32([[1e8, 1.0, -1e8]])
    assert seq_matmul(a, np.ones((3, 1), np.float32))[0, 0] == 0.0  # (1e8 + 1) - 1e8 in f32


def test_as_inaccurate_as_a_loop_on_long_sums():
    # 4096 rows of dO summed into each dV element: BLAS sums pairwise-like, a loop does not.
    q, k, v, d_out = _inputs(1, 1024, 1, 4, 1, 16, seed=3)
    ref = _ref64(q, k, v, d_out)["dv"]
    seq = attention_seq32(q, k, v, d_out)["dv"]
    blas = attention_bwd_ref(q, k, v, None, d_out, dtype=np.float32)[2]
    assert np.abs(seq - ref).max() > 3 * np.abs(blas - ref).max()


def test_exp_and_log_as_gpus_evaluate_them():
    x = -np.linspace(0, 80, 4001, dtype=np.float32)
    rel = np.abs(exp32(x) / np.exp(x.astype(np.float64)) - 1)
    # exp2 of a rounded x*log2(e): a relative error of about |x| u, never more than 2|x|+2 u
    assert (rel <= (2 * np.abs(x) + 2) * 2.0**-24).all() and rel.max() > 8 * 2.0**-24
    y = np.linspace(0.5, 4096, 4001, dtype=np.float32)
    assert np.abs(log32(y) - np.log(y.astype(np.float64))).max() < 4 * 2.0**-24 * np.log(4096)
