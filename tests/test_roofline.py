"""`py-harness roofline`: per-pass FLOPs, bytes and rates from a bench JSON, and its plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from py_harness.host.tools import roofline
from py_harness.kernels import FAST, SEED
from py_harness.runner import Split

S, H, D = 4096, 16, 128
FWD_FLOPS = 4.0 * H * S * S * D  # bench's count, B = 1, not causal


def _bench(pass_ms: dict[str, float], head_dim: int = D, causal: bool = False) -> dict:
    fwd = FWD_FLOPS * head_dim / D / (2 if causal else 1)
    row = {
        "impl": "fast",
        "seq": S,
        "head_dim": head_dim,
        "causal": causal,
        "batch": 1,
        "heads": H,
        "kv_heads": H,
        "fwd_flops": fwd,
        "extra": {"pass_ms": pass_ms},
    }
    torch_row = {**row, "impl": "torch-cuda", "extra": {}}
    return {"meta": {"runtime": "wgpu", "args": {"seq_k": None}}, "rows": [torch_row, row]}


PASSES_128 = {
    "fa2f_fwd": 5.857,
    "fa2f_bwd_pre": 0.053,
    "fa2f_bwd_dv": 6.067,
    "fa2f_bwd_dk_dq": 12.281,
    "fa2f_bwd_dq_sum": 0.371,
}


def test_the_gemm_counts_are_the_kernels_decomposition() -> None:
    def gemms(v):  # noqa: ANN001, ANN202
        return [k.gemms for k in v.backward]

    # FlashAttention counts 5 GEMMs for the backward; the fast kernels do 5 in one pass, but
    # 6 in the 128 family's two (its dV pass computes S again), which also serves head_dim
    # 256 where a device lacks 512 invocations; the seed's dQ pass computes S twice.
    assert sum(gemms(FAST.for_head_dim(64))) == sum(gemms(FAST.for_head_dim(256))) == 5
    assert sum(gemms(FAST.for_head_dim(128))) == 6
    small = {"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 256}
    assert sum(gemms(FAST.for_head_dim(256, {**FAST.required_limits, **small}))) == 6
    assert sum(gemms(SEED)) == 8 and SEED.forward.gemms == FAST.forward.gemms == 2


def test_each_pass_gets_its_flops_bytes_and_rate() -> None:
    points = {p.name: p for p in roofline.pass_points(_bench(PASSES_128))}
    assert list(points) == list(PASSES_128)  # torch's row has no passes: skipped
    per_gemm = FWD_FLOPS / 2
    assert points["fa2f_fwd"].flops == 2 * per_gemm
    assert points["fa2f_bwd_dk_dq"].flops == 4 * per_gemm
    assert points["fa2f_bwd_pre"].flops == 0 and points["fa2f_bwd_dq_sum"].flops == 0
    fwd = points["fa2f_fwd"]
    assert fwd.tflops == pytest.approx(2 * per_gemm / 5.857e-3 / 1e12)
    # Q, K, V read and O written (each S H D floats), the LSE, an empty mask's 16 bytes;
    # not the uniforms (the ALiBi slopes' 64 KiB are read a head at a time)
    assert fwd.bytes == 4 * 4 * S * H * D + 4 * S * H + 16
    # dK/dQ binds Q, K, V, dO, dK, dV and the scratch (one partial dQ sum): more than fwd
    assert points["fa2f_bwd_dk_dq"].bytes > 6 * S * H * D * 4
    # the Delta pass reads O, dO and the LSE and writes the row stats [Delta, LSE]: not the
    # scratch's dQ sums, which it binds (counted, its GB/s exceeded the H200's HBM)
    assert points["fa2f_bwd_pre"].bytes == 4 * (2 * S * H * D + S * H + 2 * S * H)


def test_causal_halves_the_flops() -> None:
    full = roofline.pass_points(_bench(PASSES_128))
    half = roofline.pass_points(_bench(PASSES_128, causal=True))
    assert [p.flops / 2 for p in full] == [p.flops for p in half]


def test_table_and_plot(tmp_path: Path) -> None:
    points = roofline.pass_points(_bench(PASSES_128))
    table = roofline.format_table(points, 67.0, 4800.0)
    assert "ridge at 14.0 FLOP/byte" in table
    fwd_line = next(line for line in table.splitlines() if "fa2f_fwd" in line)
    assert f"{points[0].tflops:.2f}" in fwd_line and f"{points[0].tflops / 67:.1%}" in fwd_line
    svg = tmp_path / "r.svg"
    roofline.write_svg(svg, points, 67.0, 4800.0, title="H200")
    text = svg.read_text()
    # one mark per GEMM pass (three), with the pass named in its tooltip
    assert text.count("<circle cx=") == 3 + 3  # the points and the legend's
    assert "fp32 FMA peak 67 TFLOP/s" in text and "D128 fa2f_bwd_dv" in text


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(SystemExit) as exc:
        roofline.main([str(missing)])
    assert exc.value.code == 2 and str(missing) in capsys.readouterr().err
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(_bench({"fa2f_bwd_dk_dv": 1.0})))  # a head_dim-64 pass at 128
    with pytest.raises(SystemExit):
        roofline.main([str(wrong)])
    assert "no pass 'fa2f_bwd_dk_dv' at head_dim 128" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        roofline.main([str(wrong), "--peak-tflops", "0"])
    assert "--peak-tflops" in capsys.readouterr().err


def test_the_partial_sums_follow_the_recorded_limits() -> None:
    """With the device's limits in the JSON (bench records them), the dQ sum pass's traffic
    holds every partial sum the backward keeps (runner.Split), not one."""
    limits = {
        "maxStorageBufferBindingSize": 1 << 31,
        "maxBufferSize": 1 << 31,
        "maxStorageBuffersPerShaderStage": 8,
        "maxComputeWorkgroupStorageSize": 49152,
        "maxComputeInvocationsPerWorkgroup": 1024,
        "maxComputeWorkgroupSizeX": 1024,
    }
    bench = _bench(PASSES_128)
    one = {p.name: p.bytes for p in roofline.pass_points(bench)}
    bench["meta"]["limits"] = limits
    kept = {p.name: p.bytes for p in roofline.pass_points(bench)}
    cfg = roofline.row_config(bench["rows"][1], {})
    slots = Split.of(FAST.for_head_dim(D, limits), cfg, limits).dq_slots
    assert slots > 1
    dq_sum = 4 * S * H * D  # one partial sum's bytes
    assert kept["fa2f_bwd_dq_sum"] - one["fa2f_bwd_dq_sum"] == (slots - 1) * dq_sum
    assert kept["fa2f_fwd"] == one["fa2f_fwd"]  # the forward binds no scratch


def test_a_variant_without_partial_sums_is_counted_without_them() -> None:
    seed = _bench({"flash_fwd": 1.0, "flash_bwd_dq": 2.0, "flash_bwd_dk_dv": 3.0}, head_dim=64)
    seed["rows"][1]["impl"] = "seed"
    without = roofline.pass_points(seed)
    seed["meta"]["limits"] = {"maxStorageBufferBindingSize": 1 << 31, "maxBufferSize": 1 << 31}
    assert [p.bytes for p in roofline.pass_points(seed)] == [p.bytes for p in without]
    assert [p.flops / (FWD_FLOPS / 4) for p in without] == [2, 4, 4]  # FWD_FLOPS at D 128
