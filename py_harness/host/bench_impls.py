"""What `python -m py_harness bench` measures: the WebGPU variants, torch SDPA, NumPy.

Each bench_* returns a Row of median forward / backward milliseconds. WebGPU passes are
timed with timestamp queries where the device has them (NativeDevice.run_passes), else
with the wall clock; torch on CUDA with torch.cuda.Event. torch is imported lazily: it is
a benchmark-only dependency.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import AttentionConfig, binding_cap
from ..gpu.device import ComputePass, Device
from ..kernels import Variant
from ..runner import AttentionRunner, create_buffers
from . import reference
from .sessions import SHADER_DIR, shader_sources


@dataclass
class Row:
    impl: str  # variant name, "torch-<device>" or "numpy-f32"
    seq: int
    head_dim: int
    causal: bool
    fwd_ms: float | None = None
    bwd_ms: float | None = None
    timing: str = ""  # timestamp-query, wall-clock, cuda-event
    extra: dict[str, Any] = field(default_factory=dict)


def flops(cfg: AttentionConfig) -> tuple[float, float]:
    """(forward, backward) FLOPs: 4 B H Sq Sk D and 2.5x that, halved when causal."""
    f = 4.0 * cfg.batch * cfg.num_heads * cfg.seq_q * cfg.seq_k * cfg.head_dim
    f = f / 2 if cfg.causal else f
    return f, 2.5 * f


def make_inputs(cfg: AttentionConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    b, h, hkv, s, d = cfg.batch, cfg.num_heads, cfg.kv_heads, cfg.seq_q, cfg.head_dim
    q, do = (rng.standard_normal((b, s, h, d), dtype=np.float32) for _ in range(2))
    k, v = (rng.standard_normal((b, cfg.seq_k, hkv, d), dtype=np.float32) for _ in range(2))
    return {"q": q, "k": k, "v": v, "d_out": do}


# ---- WebGPU variants ---------------------------------------------------------------
def _warming(args, started: float, done: int) -> bool:
    """Whether warm-up goes on after `done` runs begun at `started`: at least args.warmup
    runs and args.warmup_ms of wall time (short sizes get many runs, long ones a few)."""
    return done < args.warmup or (time.perf_counter() - started) * 1e3 < args.warmup_ms


async def _time(dev: Device, passes: list[ComputePass], args) -> dict:
    """Median GPU ms (timestamps; else wall), median per pass (timestamps only; by entry
    point) and median wall-minus-GPU overhead, over args.runs runs after the warm-up."""
    gpu, wall, per_pass = [], [], []
    started, warm = time.perf_counter(), 0
    while _warming(args, started, warm):
        await dev.run_passes(passes)
        warm += 1
    for _ in range(args.runs):
        t0 = time.perf_counter()
        ms = await dev.run_passes(passes)
        w = (time.perf_counter() - t0) * 1e3
        wall.append(w)
        gpu.append(w if ms is None else ms)
        if ms is not None:
            per_pass.append(dev.last_pass_ms)
    pass_ms = {}
    if len(per_pass) == args.runs:  # every run timed by timestamps
        pass_ms = {
            p.label: statistics.median(run[j] for run in per_pass) for j, p in enumerate(passes)
        }
    return {
        "ms": statistics.median(gpu),
        "pass_ms": pass_ms,
        "wall_ms": statistics.median(wall),
        "dispatch_overhead_ms": statistics.median(w - g for w, g in zip(wall, gpu, strict=True)),
    }


async def bench_variant(dev, variant: Variant, cfg, x, args) -> Row:
    runner = AttentionRunner(dev, shader_sources(args.shaders), variant)
    chosen = variant.for_head_dim(cfg.head_dim)
    slots = chosen.dq_slots(cfg, binding_cap(dev.limits))
    bufs = create_buffers(dev, cfg, {n: a.tobytes() for n, a in x.items()}, slots)
    try:
        fwd = await _time(dev, await runner.passes(cfg, (chosen.forward,), bufs, slots), args)
        bwd = await _time(dev, await runner.passes(cfg, chosen.backward, bufs, slots), args)
    finally:
        for b in bufs.values():
            dev.destroy_buffer(b)
    # One full case as `check` runs it: validation, uploads, dispatch, readbacks.
    t0 = time.perf_counter()
    result = await runner.run(cfg, {n: a.tobytes() for n, a in x.items()})
    case_wall = (time.perf_counter() - t0) * 1e3
    gpu = result.timings_ms["forward_ms"] + result.timings_ms["backward_ms"]
    timing = "timestamp-query" if dev.has_timestamps else "wall-clock"
    extra = {
        "fwd_dispatch_overhead_ms": fwd["dispatch_overhead_ms"],
        "bwd_dispatch_overhead_ms": bwd["dispatch_overhead_ms"],
        "pass_ms": fwd["pass_ms"] | bwd["pass_ms"],
        "case_wall_ms": case_wall,
        "case_overhead_ms": case_wall - gpu,
    }
    return Row(
        variant.name, cfg.seq_q, cfg.head_dim, cfg.causal, fwd["ms"], bwd["ms"], timing, extra
    )


async def verify_variant(dev, variant: Variant, cfg, x, shaders: Path = SHADER_DIR) -> dict:
    """Judge one run against the float64 reference, as the test suite does."""
    from .verdict import judge_outputs

    runner = AttentionRunner(dev, shader_sources(shaders), variant)
    result = await runner.run(cfg, {n: a.tobytes() for n, a in x.items()})
    shapes = {"o": x["q"].shape, "lse": (cfg.batch, cfg.num_heads, cfg.seq_q)}
    shapes |= {"dq": x["q"].shape, "dk": x["k"].shape, "dv": x["v"].shape}
    got = {n: np.frombuffer(result.outputs[n], "<f4").reshape(s) for n, s in shapes.items()}
    reports, _ = judge_outputs(cfg, x, got)
    return {
        "variant": variant.name,
        "seq": cfg.seq_q,
        "head_dim": cfg.head_dim,
        "causal": cfg.causal,
        "passed": all(r.passed for r in reports),
        "reports": [str(r) for r in reports],
    }


# ---- torch and NumPy -----------------------------------------------------------------
def torch_setup() -> tuple[Any, Any, str]:
    """(torch, device, why-not) with torch imported lazily; (None, None, reason) if absent."""
    try:
        import torch  # a benchmark-only dependency
    except ImportError:
        return None, None, "torch is not installed (pip install torch): skipping torch SDPA"
    # float32 tensors and no TF32 matmuls. (On sm80+ GPUs torch's memory-efficient SDPA
    # still runs its fp32 GEMMs on tensor cores as 3xTF32 (fp32-accurate): measured with
    # Nsight Compute on the H200, see docs/results-h200.md. WGSL has no tensor cores.)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch, dev, ""


def bench_torch(torch, device, cfg: AttentionConfig, x, args) -> Row:
    import torch.nn.functional as F  # noqa: N812

    def t(name):  # [B, S, H, D] -> [B, H, S, D]
        a = torch.from_numpy(x[name]).to(device).transpose(1, 2)
        if name in ("k", "v") and cfg.kv_heads != cfg.num_heads:
            a = a.repeat_interleave(cfg.num_heads // cfg.kv_heads, dim=1)
        return a.contiguous().requires_grad_(name != "d_out")

    q, k, v, do = (t(n) for n in ("q", "k", "v", "d_out"))
    cuda = device.type == "cuda"

    def timed(fn) -> float:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def forward() -> None:
        out.append(F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal))

    def backward() -> None:
        out.pop().backward(do)

    out: list = []
    started, warm = time.perf_counter(), 0
    while _warming(args, started, warm):
        q.grad = k.grad = v.grad = None
        timed(forward)
        timed(backward)
        warm += 1
    fwd, bwd = [], []
    for _ in range(args.runs):
        q.grad = k.grad = v.grad = None
        fwd.append(timed(forward))
        bwd.append(timed(backward))
    name = f"torch-{device.type}"
    timing = "cuda-event" if cuda else "wall-clock"
    extra = {"torch": torch.__version__}
    if cuda:
        extra["device_name"] = torch.cuda.get_device_name(device)
    return Row(
        name,
        cfg.seq_q,
        cfg.head_dim,
        cfg.causal,
        statistics.median(fwd),
        statistics.median(bwd),
        timing,
        extra,
    )


def bench_numpy(cfg: AttentionConfig, x, args) -> Row:
    kw = {"causal": cfg.causal, "scale": cfg.softmax_scale, "dtype": np.float32}
    fwd, bwd = [], []
    for _ in range(max(1, min(args.runs, 3))):
        t0 = time.perf_counter()
        reference.attention_ref(x["q"], x["k"], x["v"], **kw)
        t1 = time.perf_counter()
        reference.attention_bwd_ref(x["q"], x["k"], x["v"], None, x["d_out"], **kw)
        t2 = time.perf_counter()
        fwd.append((t1 - t0) * 1e3)
        bwd.append((t2 - t1) * 1e3)
    return Row(
        "numpy-f32",
        cfg.seq_q,
        cfg.head_dim,
        cfg.causal,
        statistics.median(fwd),
        statistics.median(bwd),
        "wall-clock",
    )
