"""The kernels over the cases generated inside their envelope, on every runtime selected
with --runtime, and a planted bug their smoke cases must catch."""

import pytest


def test_case(run_case, matrix_case):
    run_case(matrix_case)


@pytest.mark.smoke
def test_the_smoke_cases_catch_a_causal_slip(catches):
    # The dK/dV pass lets query i reach key j only when j <= i; with `>=` the key on the
    # diagonal drops out of every causal row's dK and dV.
    assert catches("kv_row > qi", "kv_row >= qi") is not None


@pytest.mark.smoke
def test_the_smoke_cases_catch_p_rounded_to_bfloat16(catches):
    # A precision loss: the dK/dV pass's P keeps 8 bits of mantissa (bfloat16), as a
    # kernel storing P in 16 bits would.
    rounded = "let p = bitcast<f32>(bitcast<u32>(exp2(s - l_tile[r])) & 0xffff0000u);"
    assert catches("let p = exp2(s - l_tile[r]);", rounded) is not None
