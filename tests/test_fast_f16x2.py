"""The fast kernels with f16 tensors and packed f16 score GEMMs (fast_f16x2): precision
losses planted in them, each of which the smoke cases must catch where the adapter offers
shader-f16. Each keeps something in fewer bits than the variant declares: its score
GEMMs are judged against f16 products and f16 sums of 16 (kernels.PACKED_F16), and the
row statistics stay float32. Losses where the baseline also rounds to f16 (Delta or dQ's
partial sums through f16, the backward's P rounded to f16) go uncaught: the declaration is
one for all of a variant's GEMMs, so the baseline computes those in f16 too
(docs/verdict.md, "Half precision")."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.smoke, pytest.mark.variants("fast_f16x2")]

LOSSES = {
    # the forward's LSE stored through f16
    "lse-as-f16": (
        "ffw_lse[ff_stat_row(b, h, qi)] = lse;",
        "ffw_lse[ff_stat_row(b, h, qi)] = f32(f16(lse));",
    ),
    # the score operands staged with 7 of f16's 10 mantissa bits
    "score-operands-7-bits": (
        "return pack2x16float(vec2<f32>(x, y));",
        "return pack2x16float(vec2<f32>(x, y)) & 0xfff8fff8u;",
    ),
    # each score's float32 total kept in f16 between its f16 sums
    "score-totals-in-f16": (
        "return s + vec4<f32>(f32(h[0].x), f32(h[0].y), f32(h[1].x), f32(h[1].y));",
        "return vec4<f32>(vec4<f16>(s) + vec4<f16>(h[0].x, h[0].y, h[1].x, h[1].y));",
    ),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_the_smoke_cases_catch_a_precision_loss(catches, loss: str) -> None:
    assert catches(*LOSSES[loss]) is not None
