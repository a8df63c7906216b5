"""The f16 kernels (bhsd_f16: f16 tensors, float32 arithmetic) and precision losses planted
in them that the smoke cases must catch: each keeps an intermediate in fewer bits than the
declared float32 arithmetic. Skipped where the adapter lacks shader-f16."""

import pytest

pytestmark = [pytest.mark.smoke, pytest.mark.variants("bhsd_f16")]

LOSSES = {
    # the LSE kept as f16 where the kernels declare it f32 (an f16 intermediate)
    "lse stored as f16": (
        "L[head + q_row] = m2 + log2(l);",
        "L[head + q_row] = f32(f16(m2 + log2(l)));",
    ),
    # Delta = rowsum(dO o O) kept as f16
    "delta stored as f16": ("Delta[r] = partial[0];", "Delta[r] = f32(f16(partial[0]));"),
    # the forward's P rounded to f16 before it weights V
    "forward p as f16": ("let p = exp2(s[j] - m_new);", "let p = f32(f16(exp2(s[j] - m_new)));"),
    # the dK/dV pass's P rounded to f16
    "backward p as f16": ("let p = exp2(s - l_tile[r]);", "let p = f32(f16(exp2(s - l_tile[r])));"),
    # dK summed in f16, one term at a time, no float32 chunks
    "dk summed in f16": (
        "dk[d] += ds * q_tile[r * HEAD_DIM + d];",
        "dk[d] = f32(f16(dk[d] + ds * q_tile[r * HEAD_DIM + d]));",
    ),
    # dQ summed in f16
    "dq summed in f16": (
        "dq[d] += ds * k_tile[j * HEAD_DIM + d];",
        "dq[d] = f32(f16(dq[d] + ds * k_tile[j * HEAD_DIM + d]));",
    ),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_the_smoke_cases_catch_a_precision_loss(catches, loss):
    assert catches(*LOSSES[loss]) is not None
