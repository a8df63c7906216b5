"""What `python -m py_harness bench` measures: the WebGPU variants, torch SDPA, NumPy.

Each bench_* returns a Row of median forward / backward milliseconds. WebGPU passes are
timed inside the runtime (timing.py: timestamp queries where the device has them, else
the wall clock); torch on CUDA with torch.cuda.Event, under the same warm-up plan. torch
is imported lazily: it is a benchmark-only dependency.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...config import AttentionConfig
from ...kernels import Variant
from ...timing import TimingPlan
from .. import variants
from ..judge import reference
from ..judge.inputs import draw_tensors
from ..judge.verdict import judge_outputs
from ..paths import SHADER_DIR, shader_sources
from ..runtimes.sessions import Session
from ..wire import call_with_tensors, run_on


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
    """(forward, backward) FLOPs: 4 B H Sq Sk D (a variable-length batch: summed over its
    sequences) and 2.5x that, halved when causal."""
    scores = sum(len_q * len_k for _, len_q, _, len_k in cfg.sequences())
    f = 4.0 * cfg.num_heads * scores * cfg.head_dim
    f = f / 2 if cfg.causal else f
    return f, 2.5 * f


# --logits: the matrix's large-score draws (judge/inputs.py, scale_logits)
LOGITS = ("normal", "big", "shifted")
# --mask: the matrix's additive masks of those kinds (cases.mask_shape): keys
# padded per batch element (the last 3 + 7 b are -inf), or one normal draw per (query, key)
MASKS = ("none", "keypad", "full")


def make_inputs(
    cfg: AttentionConfig, seed: int = 0, logits: str = "normal", mask: str = "none"
) -> dict[str, np.ndarray]:
    """The benchmark's tensors: the matrix's draw (inputs.draw_tensors) from `seed`."""
    rng = np.random.default_rng(seed)
    large, shifted = logits == "big", logits == "shifted"
    return draw_tensors(cfg, rng, mask=mask, large=large, shifted=shifted)


# ---- WebGPU variants ---------------------------------------------------------------
def bench_variant(session: Session, variant: Variant, cfg: AttentionConfig, x, args) -> Row:
    """The variant timed inside the session's runtime (timing.time_variant, through the
    service's time_case entry)."""
    request = {
        "config": cfg.to_dict(),
        "variant": variant.name,
        "sources": shader_sources(args.shaders),
        "runs": args.runs,
        "warmup": args.warmup,
        "warmup_ms": args.warmup_ms,
    }
    reply = call_with_tensors(session, "time_case", request, x)[0]  # 128 MB at S = 4096
    fwd, bwd = reply["fwd"], reply["bwd"]
    extra = {
        "fwd_dispatch_overhead_ms": fwd["dispatch_overhead_ms"],
        "bwd_dispatch_overhead_ms": bwd["dispatch_overhead_ms"],
        "pass_ms": fwd["pass_ms"] | bwd["pass_ms"],
        "case_wall_ms": reply["case_wall_ms"],
        "case_overhead_ms": reply["case_overhead_ms"],
        "case_fresh_overhead_ms": reply["case_fresh_overhead_ms"],
    }
    return Row(
        variant.name,
        cfg.seq_q,
        cfg.head_dim,
        cfg.causal,
        fwd["ms"],
        bwd["ms"],
        reply["timing"],
        extra,
    )


def verify_variant(
    session: Session,
    variant: Variant,
    cfg: AttentionConfig,
    x,
    shaders: Path = SHADER_DIR,
    large_scores: bool = False,
) -> dict:
    """Judge a run against the float64 reference, as the test suite does (large_scores:
    with the overflow test's factors, as for --logits big or shifted). The backward runs
    twice on the same buffers and must give the same bits both times, as in the matrix's
    repeated-backward cases: a kernel that adds onto the last run's partial sums fails."""
    sources = shader_sources(shaders)
    precision = variants.precision(variant.name)  # an f16 variant: its inputs as it reads them
    x = precision.round_inputs(x)
    reply = run_on(session, cfg, x, sources=sources, backward_runs=2, variant=variant.name)
    reports, _ = judge_outputs(
        cfg, x, reply["arrays"], large_scores=large_scores, precision=precision
    )
    digests = reply.get("backward_digests", [])
    same = len(digests) == 2 and digests[0] == digests[1]
    twice = "the same bits" if same else "FAIL: the bits differ"
    return {
        "variant": variant.name,
        "seq": cfg.seq_q,
        "head_dim": cfg.head_dim,
        "causal": cfg.causal,
        "passed": all(r.passed for r in reports) and same,
        "reports": [
            *(str(r) for r in reports),
            f"backward twice: {twice} (sha256 of dq|dk|dv: {[d[:12] for d in digests]})",
        ],
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
    # Nsight Compute on the H200, see docs/records/gpu.md. WGSL has no tensor cores.)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch, dev, ""


def bench_torch(torch, device, cfg: AttentionConfig, x, args, half: bool = False) -> Row:
    """torch SDPA forward + backward in float32, or (half) in float16: its fp16 kernels, the
    ones an f16 WGSL variant is set beside."""
    import torch.nn.functional as F  # noqa: N812

    dtype = torch.float16 if half else torch.float32

    def t(name):  # [B, S, H, D] -> [B, H, S, D]
        a = torch.from_numpy(x[name]).to(device, dtype).transpose(1, 2)
        if name in ("k", "v") and cfg.kv_heads != cfg.num_heads:
            a = a.repeat_interleave(cfg.num_heads // cfg.kv_heads, dim=1)
        return a.contiguous().requires_grad_(name != "d_out")

    q, k, v, do = (t(n) for n in ("q", "k", "v", "d_out"))
    cuda = device.type == "cuda"
    mask = torch_mask(torch, device, cfg, x)
    mask = None if mask is None else mask.to(dtype)

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
        causal = cfg.causal and mask is None
        out.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal))

    def backward() -> None:
        out.pop().backward(do)

    out: list = []
    plan = TimingPlan(args.runs, args.warmup, args.warmup_ms)
    started, warm = time.perf_counter(), 0
    while plan.warming(started, warm):
        q.grad = k.grad = v.grad = None
        timed(forward)
        timed(backward)
        warm += 1
    fwd, bwd = [], []
    for _ in range(args.runs):
        q.grad = k.grad = v.grad = None
        fwd.append(timed(forward))
        bwd.append(timed(backward))
    name = f"torch-{device.type}" + ("-f16" if half else "")
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


def torch_mask(torch, device, cfg: AttentionConfig, x):
    """SDPA's attn_mask where is_causal cannot say it all: the additive mask (broadcast over
    [B, H, Sq, Sk]) plus, with causal, -inf past a causal edge off torch's top-left one
    (causal_offset != 0). None where is_causal (or nothing) does."""
    if "mask" not in x and not (cfg.causal and cfg.causal_offset):
        return None
    mask = torch.zeros((cfg.seq_q, cfg.seq_k), device=device)
    if "mask" in x:
        mask = mask + torch.from_numpy(x["mask"]).to(device)
    if cfg.causal:
        kw = {"causal": True, "causal_offset": cfg.causal_offset}
        hidden = ~reference.visible_mask(cfg.seq_q, cfg.seq_k, **kw)
        mask = mask.masked_fill(torch.from_numpy(hidden).to(device), float("-inf"))
    return mask


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
