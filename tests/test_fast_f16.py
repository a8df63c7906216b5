"""The fast kernels with f16 tensors (fast_f16): precision losses planted in them, each of
which the smoke cases must catch where the adapter offers shader-f16. Each keeps something
in f16 that the variant declares float32 (its arithmetic is the fast variant's)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.smoke, pytest.mark.variants("fast_f16")]

LOSSES = {
    # the forward's LSE stored through f16
    "lse-as-f16": (
        "ffw_lse[ff_stat_row(b, h, qi)] = lse;",
        "ffw_lse[ff_stat_row(b, h, qi)] = f32(f16(lse));",
    ),
    # Delta = rowsum(dO o O) kept as f16 in the row stats
    "delta-as-f16": (
        "vec2<f32>((acc.x + acc.y) + (acc.z + acc.w), ffb_lse[row])",
        "vec2<f32>(f32(f16((acc.x + acc.y) + (acc.z + acc.w))), ffb_lse[row])",
    ),
    # the backward's P rounded to f16
    "backward-p-as-f16": (
        "let pij = select(vec4<f32>(0.0), exp(x - lse), x > vec4<f32>(FF_MASKED));",
        "let pij = select(vec4<f32>(0.0), vec4<f32>(vec4<f16>(exp(x - lse))), "
        "x > vec4<f32>(FF_MASKED));",
    ),
    # dQ's partial sums read back through f16
    "dq-partials-as-f16": (
        "acc += ffb_scratch4[i];",
        "acc += vec4<f32>(vec4<f16>(ffb_scratch4[i]));",
    ),
    # the P V, dS K and dS^T Q sums kept in f16 between steps of four terms
    "axpy-sums-in-f16": (
        "fma(vec4<f32>(w.x), v[0], acc)",
        "fma(vec4<f32>(w.x), v[0], vec4<f32>(vec4<f16>(acc)))",
    ),
    # the score dot products kept in f16 between steps of four terms
    "score-sums-in-f16": ("fma(a.x, b.x, acc)", "fma(a.x, b.x, f32(f16(acc)))"),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_the_smoke_cases_catch_a_precision_loss(catches, loss: str) -> None:
    assert catches(*LOSSES[loss]) is not None
