"""The forward over the cases generated inside its envelope (O judged: the kernels write
no log-sum-exp), and a planted bug its smoke cases must catch."""

import pytest


def test_case(run_case, matrix_case):
    run_case(matrix_case)


@pytest.mark.smoke
def test_the_smoke_cases_catch_a_causal_slip(catches):
    # The first of the softmax pass's loops over the visible keys, one short: each row's
    # own key gets no score, and its weight is computed from a score never written.
    assert catches("t2 <= t", "t2 < t") is not None
