"""f16 tensors: their bytes, the arithmetic a kernel declares, the baseline computed in it,
the rounding allowed an f16 output, and the declarations refused (no GPU: the kernels
themselves are judged in examples/bhsd-attention, bhsd_f16, with planted precision losses)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from py_harness import dtypes
from py_harness.config import AttentionConfig, ConfigError
from py_harness.dtypes import Arithmetic
from py_harness.host.judge import compare, reference, verdict
from py_harness.host.judge.sequential_ref import attention_seq32, seq_matmul, to_f16
from py_harness.host.variant_file import VariantFileError, load
from py_harness.kernels import SEED
from py_harness.runner import AttentionRunner
from tests.fakes import NoGPUWorkDevice, own_thread

BHSD = Path(__file__).resolve().parents[1] / "examples/bhsd-attention/kernels"


@pytest.fixture(params=["struct", "numpy"])
def converters(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test below with the page's conversions (struct) and a host backend's (NumPy)."""
    from py_harness.host.gpu import host_memory

    pair = {
        "struct": (dtypes._struct_to_f16, dtypes._struct_from_f16),
        "numpy": (host_memory.f16_from_f32, host_memory.f32_from_f16),
    }[request.param]
    monkeypatch.setattr(dtypes, "_to_f16", pair[0])
    monkeypatch.setattr(dtypes, "_from_f16", pair[1])
    return request.param


def test_both_conversions_give_the_same_bits() -> None:
    from py_harness.host.gpu import host_memory

    every_f16 = np.arange(1 << 16, dtype=np.uint16).tobytes()
    wide = host_memory.f32_from_f16(every_f16)
    same = np.frombuffer(wide, np.uint32) == np.frombuffer(
        dtypes._struct_from_f16(every_f16), np.uint32
    )
    finite = np.isfinite(np.frombuffer(wide, np.float32))
    assert same[finite].all()  # NaN payloads aside
    rng = np.random.default_rng(0)  # ties, subnormals, zeros and the range's edge among them
    x = np.concatenate(
        [
            np.frombuffer(wide, np.float32)[finite] * np.float32(1 + 2**-11),
            rng.standard_normal(10000).astype(np.float32) * 2.0 ** rng.integers(-26, 15, 10000),
            np.float32([0.0, -0.0, 65519.0, -65504.0, 2**-25, -(2**-25), 3 * 2**-26]),
        ]
    ).astype(np.float32)
    x = x[np.abs(x) < 65520].tobytes()
    assert host_memory.f16_from_f32(x) == dtypes._struct_to_f16(x)


def test_f16_bytes_round_to_nearest_even_and_widen_exactly(converters: str) -> None:
    vals = np.float32([1.0, 1 + 2**-11, 1 + 3 * 2**-11, -2.5e-8, 65504, -np.inf, np.nan, 0.1])
    packed = dtypes.encode(vals.tobytes(), "f16")
    assert len(packed) == 2 * len(vals)
    back = np.frombuffer(dtypes.decode(packed, "f16"), np.float32)
    np.testing.assert_array_equal(back, vals.astype(np.float16).astype(np.float32))
    assert dtypes.encode(vals.tobytes(), "f32") == vals.tobytes()


def test_a_value_past_f16s_range_is_refused_naming_the_tensor(converters: str) -> None:
    with pytest.raises(ConfigError, match=r"^q: holds 70000, past f16's largest finite value"):
        dtypes.encode(np.float32([1.0, 7e4, np.inf]).tobytes(), "f16", "q")
    near = np.float32([65519.0, -65510.0])  # rounds to the largest finite value, not past it
    back = dtypes.decode(dtypes.encode(near.tobytes(), "f16", "q"), "f16")
    assert np.frombuffer(back, np.float32).tolist() == [65504.0, -65504.0]


def test_f16_ulp_is_the_spacing_of_f16_values() -> None:
    x = np.array([1.0, 1.999, -3.0, 2**-20, 0.0, 65504.0])
    np.testing.assert_array_equal(verdict.f16_ulp(x), [2**-10, 2**-10, 2**-9, 2**-24, 2**-24, 32])
    for v in (0.3, 7.7, 1e-3):  # the next f16 up is one ulp away
        h = np.float16(v)
        assert float(np.nextafter(h, np.float16(np.inf))) - float(h) == verdict.f16_ulp(float(h))


def test_sums_and_products_in_f16_lose_what_f16_loses() -> None:
    ones_row, ones_col = np.ones((1, 4096), np.float32), np.ones((4096, 1), np.float32)
    assert seq_matmul(ones_row, ones_col)[0, 0] == 4096
    assert seq_matmul(ones_row, ones_col, Arithmetic(accumulate="f16"))[0, 0] == 2048  # 2048 + 1
    chunked = Arithmetic(accumulate="f16", chunk=1024)
    assert seq_matmul(ones_row, ones_col, chunked)[0, 0] == 4096  # each chunk's 1024 is exact
    x = np.float32([[1 + 2**-10]])  # an f16 value; x * x = 1 + 2^-9 + 2^-20
    assert seq_matmul(x, x)[0, 0] == np.float32(1 + 2**-9 + 2**-20)
    assert seq_matmul(x, x, Arithmetic(products="f16"))[0, 0] == np.float32(1 + 2**-9)


def _inputs(seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: to_f16(rng.standard_normal((1, 64, 2, 32))) for n in ("q", "k", "v", "d_out")}


def test_the_baseline_in_a_declared_arithmetic_is_as_inaccurate_as_it() -> None:
    x = _inputs()
    ref = reference.attention_ref(x["q"], x["k"], x["v"], dtype=np.float64)[0]
    f32 = attention_seq32(x["q"], x["k"], x["v"], x["d_out"])
    half = Arithmetic(products="f16", accumulate="f16", chunk=8, intermediates="f16")
    f16 = attention_seq32(x["q"], x["k"], x["v"], x["d_out"], arith=half)
    e32, e16 = np.abs(f32["o"] - ref).max(), np.abs(f16["o"] - ref).max()
    assert 2**-11 * np.abs(ref).max() / 64 < e16 and e16 > 100 * e32  # f16's u, not f32's
    stored = attention_seq32(x["q"], x["k"], x["v"], x["d_out"], stored=frozenset({"lse"}))
    assert not np.array_equal(stored["dq"], f32["dq"])  # the backward read an f16 LSE
    np.testing.assert_array_equal(stored["o"], f32["o"])  # the forward's O is its own


def test_an_f16_output_is_allowed_its_own_rounding_and_no_more() -> None:
    cfg = AttentionConfig(1, 2, 64, 64, 32)
    x = _inputs()
    precision = verdict.Precision(frozenset({"q", "k", "v", "d_out", "o"}))
    ref = verdict.references(cfg, x, np.float64)["o"]
    rounded = to_f16(ref)
    [ok], _ = verdict.judge_outputs(cfg, x, {"o": rounded}, precision=precision)
    assert ok.passed and 0 < ok.ratio <= 0.51, ok  # half an ulp against one
    assert ok.allowances[verdict.F16_ROUNDING] > 0 and "f16 rounding" in str(ok)
    wrong = rounded.copy()
    wrong.flat[77] += 3 * verdict.f16_ulp(wrong.flat[77])  # three ulps off
    [bad], _ = verdict.judge_outputs(cfg, x, {"o": wrong}, precision=precision)
    assert not bad.passed and bad.worst_index == np.unravel_index(77, ref.shape)
    [f32], _ = verdict.judge_outputs(cfg, x, {"o": rounded})  # declared f32: no allowance
    assert not f32.passed


def test_the_report_names_the_declared_arithmetic_that_set_the_bound() -> None:
    cfg = AttentionConfig(1, 2, 64, 64, 32)
    x = _inputs()
    half = Arithmetic(products="f16", accumulate="f16", chunk=8)
    precision = verdict.Precision(frozenset({"q", "k", "v", "d_out"}), half)
    ref = verdict.references(cfg, x, np.float64)
    reports, _ = verdict.judge_outputs(cfg, x, ref, precision=precision)
    assert {r.baseline for r in reports} == {"seq(f16 products, f16 sums of 8)"}


def test_dtypes_are_checked_where_declared() -> None:
    v = replace(SEED, name="half", dtypes={"q": "f16", "dq": "f16"})
    assert v.required_features == ("shader-f16",) and v.dtype("q") == "f16"
    assert v.dtype("k") == "f32" and SEED.required_features == ()
    assert v.missing_features({"shader-f16"}) is None
    assert "shader-f16 (f16: dq, q)" in v.missing_features({"timestamp-query"})
    for bad, words in (
        ({"q": "f64"}, "dtypes.q: one of f32, f16"),
        ({"params": "f16"}, "dtypes.params: a uniform"),
        ({"qkv": "f16"}, "dtypes.qkv: no kernel binds qkv"),
    ):
        with pytest.raises(ConfigError, match=words):
            replace(SEED, dtypes=bad)
    with pytest.raises(ConfigError, match="arithmetic.chunk: counts f16 sums"):
        Arithmetic(chunk=8)
    with pytest.raises(ConfigError, match="arithmetic.products: one of f32, f16"):
        Arithmetic(products="bf16")
    assert replace(v, arithmetic=Arithmetic(products="f16")).to_dict()["dtypes"] == v.dtypes
    back = type(v).from_dict(replace(v, arithmetic=Arithmetic(products="f16")).to_dict())
    assert back.arithmetic.products == "f16" and back.dtypes == v.dtypes


def test_a_binding_whose_elements_differ_from_the_declared_dtype_is_refused(
    tmp_path: Path,
) -> None:
    text = (BHSD / "bhsd_f16.toml").read_text()
    f32_wgsl = text.replace('"bhsd_attention_f16_d', f'"{BHSD}/bhsd_attention_d')
    path = tmp_path / "v.toml"
    path.write_text(f32_wgsl)
    with pytest.raises(VariantFileError) as err:
        load(path)
    text = str(err.value)
    assert text.startswith(f"{path}:") and "holds f32 (array<f32>), but q is f16" in text, text


def test_the_runner_refuses_f16_input_it_cannot_hold_and_an_adapter_without_f16() -> None:
    half = replace(SEED, name="half", dtypes={"q": "f16"})
    cfg = AttentionConfig(1, 2, 4, 4, 8)
    ones = np.ones((1, 4, 2, 8), np.float32)
    tensors = {n: ones.tobytes() for n in ("q", "k", "v", "d_out")}
    runner = AttentionRunner(NoGPUWorkDevice(), dict.fromkeys(SEED.files, ""), half)
    big = tensors | {"q": (ones * 1e5).tobytes()}
    with pytest.raises(ConfigError, match=r"^q: holds 100000, past f16's"):
        own_thread(asyncio.run, runner.run(cfg, big))
    with pytest.raises(ConfigError, match=r"half needs the adapter feature shader-f16 \(f16: q\)"):
        own_thread(asyncio.run, runner.run(cfg, tensors))


def test_a_matrix_judged_in_a_declared_arithmetic_keeps_its_own_reference_cache_entry() -> None:
    cfg = AttentionConfig(1, 2, 8, 8, 8)
    x = {n: a[:, :8, :, :8] for n, a in _inputs().items()}
    k32 = verdict.ReferenceCache.key(cfg, x)
    k16 = verdict.ReferenceCache.key(cfg, x, verdict.Precision(arithmetic=Arithmetic("f16")))
    assert k32 != k16
    assert compare.FACTORS["o"] == 2.0  # the rule's factors are the float32 ones
