"""The NumPy dropout hash (py_harness/host/judge/dropout.py) against a scalar model of the WGSL.

Golden values were computed once by the same functions written in C (uint32_t
arithmetic, float for the f32 steps, gcc on x86-64) and pasted here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from py_harness.host.judge.cases import DROPOUT_EDGE
from py_harness.host.judge.dropout import (
    dropout_bits,
    dropout_multiplier,
    dropout_uniform,
    hash3,
    pcg,
)

pytestmark = pytest.mark.filterwarnings("error")  # uint32 scalar wrap-around would warn
M32 = 0xFFFFFFFF
u32s = st.integers(0, M32)


def scalar_pcg(v: int) -> int:
    state = (v * 747796405 + 2891336453) & M32
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & M32
    return (word >> 22) ^ word


def scalar_hash3(x: int, y: int, z: int) -> int:
    return scalar_pcg(x ^ scalar_pcg(y ^ scalar_pcg(z)))


def scalar_dropout_scale(p: float, seed: int, bh: int, qi: int, kj: int) -> float:
    """dropout_scale with float32 p and float32 1 / (1 - p); u is exact in a double."""
    p32 = np.float32(p)
    if p32 <= 0:
        return 1.0
    u = (scalar_hash3(seed ^ scalar_pcg(bh), qi, kj) >> 8) / 2**24
    if u < float(p32):
        return 0.0
    return float(np.float32(1) / (np.float32(1) - p32))


GOLDEN_PCG = {
    0: 129708002,
    1: 2831084092,
    2: 2055130248,
    12345: 4099845390,
    0xFFFFFFFF: 3861530882,
    0x80000000: 566699590,
}
GOLDEN_HASH3 = {
    (0, 0, 0): 2145236065,
    (1, 2, 3): 1493219802,
    (42, 7, 1000): 1663122860,
    (0xDEADBEEF, 0xFFFFFFFF, 5): 4153114042,
}
# dropout_bits(seed=1234, batch=1, num_heads=2, seq_q=2, seq_k=3)
GOLDEN_BITS = [
    [[7872538, 4728048, 8651426], [8804023, 8617657, 9092429]],
    [[794077, 16002893, 14259907], [11057265, 4536524, 1511798]],
]


def test_golden_values():
    for v, want in GOLDEN_PCG.items():
        assert scalar_pcg(v) == want and int(pcg(v)) == want
    for (x, y, z), want in GOLDEN_HASH3.items():
        assert scalar_hash3(x, y, z) == want and int(hash3(x, y, z)) == want
    np.testing.assert_array_equal(dropout_bits(1234, 1, 2, 2, 3), [GOLDEN_BITS])
    mult = dropout_multiplier(0.5, 1234, 1, 2, 2, 3, np.float32)
    np.testing.assert_array_equal(mult.ravel(), [0, 0, 2, 2, 2, 2, 0, 2, 2, 2, 0, 0])
    # float32 1 / (1 - 0.17f) from C: 0x1.346f0ap+0
    kept = dropout_multiplier(0.17, 1, 1, 1, 4, 4, np.float32)
    assert kept.max() == np.float32(float.fromhex("0x1.346f0ap+0"))


@given(st.lists(u32s, min_size=1, max_size=64))
def test_pcg_matches_scalar(values):
    np.testing.assert_array_equal(pcg(np.array(values, np.uint32)), [scalar_pcg(v) for v in values])


@given(u32s, u32s, u32s)
def test_hash3_matches_scalar(x, y, z):
    assert int(hash3(x, y, z)) == scalar_hash3(x, y, z)


def test_hash3_broadcasts_and_matches_scalar_on_random_arrays():
    rng = np.random.default_rng(0)
    x, y, z = rng.integers(0, 2**32, size=(3, 500), dtype=np.uint64)
    got = hash3(x[:, None], y[:, None], z[:7])  # [500, 7] by broadcasting
    want = [
        [scalar_hash3(int(a), int(b), int(c)) for c in z[:7]] for a, b in zip(x, y, strict=True)
    ]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.uint32


@pytest.mark.parametrize("p, seed", [(0.3, 0), (0.17, 0xDEADBEEF), (0.9, 2**31 + 5)])
def test_multiplier_matches_scalar_loop(p, seed):
    b, h, sq, sk = 2, 3, 5, 7
    want = np.array(
        [
            [
                [
                    [scalar_dropout_scale(p, seed, bi * h + hi, qi, kj) for kj in range(sk)]
                    for qi in range(sq)
                ]
                for hi in range(h)
            ]
            for bi in range(b)
        ]
    )
    got32 = dropout_multiplier(p, seed, b, h, sq, sk, np.float32)
    np.testing.assert_array_equal(got32, want)
    got64 = dropout_multiplier(p, seed, b, h, sq, sk, np.float64)
    np.testing.assert_array_equal(got64 == 0, want == 0)
    assert got64.max() == 1 / (1 - float(np.float32(p)))  # the exact-reference scale
    bits = dropout_bits(seed, b, h, sq, sk)
    assert bits.max() < 2**24
    np.testing.assert_array_equal(dropout_uniform(seed, b, h, sq, sk), bits / 2**24)


def test_keep_threshold_is_exact_and_edge_probabilities():
    u = dropout_uniform(5, 1, 1, 8, 8)
    t = np.sort(u.ravel())[20]  # a p that equals one u exactly: that weight is kept
    m = dropout_multiplier(float(t), 5, 1, 1, 8, 8, np.float32)
    np.testing.assert_array_equal(m != 0, u >= t)
    assert (m[u == t] != 0).all()
    above = np.nextafter(t, np.float32(1))  # and one ulp above it is dropped
    assert (dropout_multiplier(float(above), 5, 1, 1, 8, 8)[u == t] == 0).all()
    assert (dropout_multiplier(0.0, 5, 2, 2, 3, 3) == 1).all()
    assert (dropout_multiplier(-0.1, 5, 2, 2, 3, 3) == 1).all()
    assert (dropout_multiplier(1.0, 5, 2, 2, 3, 3) == 0).all()
    assert dropout_multiplier(0.2, 5, 2, 2, 3, 0).shape == (2, 2, 3, 0)


def test_dropped_fraction_close_to_p():
    # FlashAttention's check: the dropped fraction is within 0.01 of p.
    for p in (0.17, 0.5):
        frac = (dropout_multiplier(p, 42, 2, 3, 64, 128) == 0).mean()
        assert abs(frac - p) < 0.01


def test_the_dropout_edge_case_has_a_weight_at_the_edge():
    # cases.DROPOUT_EDGE exists for its one weight with u == p, which the kernels must keep
    # (a kernel that drops it is a planted bug: mutants "dropout-keep-edge"). Ties are
    # 2^-24 per weight, so a change to the hash or the case would leave it without one.
    c = DROPOUT_EDGE
    u = dropout_uniform(c.seed, c.batch, c.num_heads, c.seq_q, c.seq_k)
    assert np.argwhere(u == np.float32(c.dropout_p)).tolist() == [[0, 0, 5, 2]]
