"""`python -m py_harness bench`: time the kernel variants, torch SDPA and the NumPy reference.

In one run on one machine: forward and backward of each selected variant on one runtime
(--runtime: wgpu, dawn, node, chromium, firefox), timed inside it (timing.py: GPU time
from timestamp queries where the adapter has them, else wall clock), so the same WGSL is
compared through naga and through Tint; torch.nn.functional.scaled_dot_product_attention
forward + backward in float32 on the same machine's CUDA device (else CPU), and the NumPy
float32 reference at small sizes. Warm-up runs, then the median of --runs. Prints a
table, writes JSON and an SVG plot, and reports harness overhead (pipeline compile time;
wall time beyond GPU time per dispatch and per full case). --verify judges one size per
variant against the float64 reference (compare.judge, FlashAttention's rule).

Needs numpy and what the runtime needs (wgpu by default; torch optional, imported lazily).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ...config import AttentionConfig, cu_seqlens
from ...kernels import VARIANTS
from .. import variants
from ..arg_types import natural, naturals, positive_int, positive_ints
from ..judge import blocks
from ..judge.cases import Case, alibi_shape, mask_shape
from ..paths import SHADER_DIR, cannot_write_file, output_dir, shader_sources
from ..runtimes.registry import RUNTIMES, runtime
from ..runtimes.sessions import Session
from ..variants import shader_dir_refusal
from .bench_impls import (
    LOGITS,
    MASKS,
    Row,
    bench_numpy,
    bench_torch,
    bench_variant,
    flops,
    make_inputs,
    torch_setup,
    verify_variant,
)
from .bench_plot import write_svg

DROPOUT_SEED = Case.seed  # --dropout's hash seed: the matrix's default
GPU_DEFAULTS = {"seq": "1024,2048,4096", "head_dim": "64,128", "heads": 16, "runs": 10}
# CPU adapters (lavapipe, SwiftShader) are 1000x slower: small sizes, few runs.
CPU_DEFAULTS = {"seq": "128,256", "head_dim": "64", "heads": 4, "runs": 3}
CAUSALS = {"both": [False, True], "yes": [True], "no": [False]}  # --causal
# The command line's option for each configuration field a refusal names (config.validate).
OPTION_OF = {
    "batch": "--batch",
    "num_heads": "--heads",
    "num_kv_heads": "--kv-heads",
    "batch * num_heads": "--batch x --heads",
    "seq_q": "--seq",
    "seq_k": "--seq-k",
    "head_dim": "--head-dim",
    "causal_offset": "--causal-offset",
    "window_left": "--window-left",
    "window_right": "--window-right",
    "softcap": "--softcap",
    "dropout_p": "--dropout",
    "cu_seqlens_q": "--lengths",
    "cu_seqlens_k": "--lengths",
}


def _adapter_type(info: dict[str, str]) -> str:
    """'CPU', 'DiscreteGPU', ... as the implementation reports it; else from known
    software adapter names."""
    if kind := info.get("type"):
        return kind
    name = " ".join(info.values()).lower()
    return "CPU" if any(s in name for s in ("llvmpipe", "swiftshader", "lavapipe")) else ""


def _ints(spec: str) -> list[int]:
    return [int(s) for s in str(spec).split(",") if s.strip()]


def _rate(fl: float, ms: float | None, unit: float) -> str:
    return f"{fl / (ms * 1e-3) / unit:9.2f}" if ms else f"{'-':>9}"


def format_row(row: Row, cfg: AttentionConfig, torch_row: Row | None, unit: float) -> str:
    ffl, bfl = flops(cfg)

    def ratio(ms, ref):
        return f"{ms / ref:8.2f}x" if ms and ref else f"{'-':>9}"

    tf = torch_row.fwd_ms if torch_row else None
    tb = torch_row.bwd_ms if torch_row else None
    return (
        f"{row.impl:<12} {row.seq:>6} {row.head_dim:>4} {'yes' if row.causal else 'no':>6} "
        f"{row.fwd_ms or 0:10.3f} {_rate(ffl, row.fwd_ms, unit)} {row.bwd_ms or 0:10.3f} "
        f"{_rate(bfl, row.bwd_ms, unit)} {ratio(row.fwd_ms, tf)} {ratio(row.bwd_ms, tb)}  "
        f"{row.timing}"
    )


def _row_json(row: Row, cfg: AttentionConfig, torch_row: Row | None) -> dict:
    ffl, bfl = flops(cfg)
    d = asdict(row) | {"batch": cfg.batch, "heads": cfg.num_heads, "kv_heads": cfg.kv_heads}
    d |= {"fwd_flops": ffl, "bwd_flops": bfl}
    for key, fl in (("fwd", ffl), ("bwd", bfl)):
        ms = d[f"{key}_ms"]
        d[f"{key}_tflops"] = fl / (ms * 1e-3) / 1e12 if ms else None
        ref = getattr(torch_row, f"{key}_ms") if torch_row else None
        d[f"{key}_vs_torch"] = ms / ref if ms and ref else None
    return d


def _recorded_args(args: argparse.Namespace) -> dict:
    """The options as the JSON records them: no path of this machine (the built-in shaders
    by name; not the JSON's own location), so the file can be shared as it is."""
    recorded = {k: (str(a) if isinstance(a, Path) else a) for k, a in vars(args).items()}
    del recorded["json"]
    if args.shaders == SHADER_DIR:
        recorded["shaders"] = "built-in"
    return recorded


def run(args: argparse.Namespace) -> int:
    from ..engine import open_session

    blocks.WORKERS = args.judge_workers

    if args.seq_k is not None and args.lengths:
        raise SystemExit("--seq-k: not with --lengths")
    if args.seq_k is not None and args.causal != "no" and args.causal_offset is None:
        raise SystemExit(
            "--seq-k with causal: give --causal-offset (torch's is_causal aligns Sq != Sk "
            "top-left, offset 0; FlashAttention-2 bottom-right, offset Sk - Sq)"
        )
    if args.mask != "none" and args.lengths:
        raise SystemExit("--mask: not with --lengths (an additive mask is [B, H, Sq, Sk])")
    if not 0.0 <= args.dropout < 1.0:
        raise SystemExit(f"--dropout: a probability in [0, 1), got {args.dropout}")
    refuse_what_cannot_run(args)
    for option, path in (("--json", args.json), ("--plot", Path(args.plot) if args.plot else None)):
        if path is not None and (why := cannot_write_file(path)):
            raise SystemExit(f"{option}: {why}")
    reason = runtime(args.runtime).missing()
    if reason:
        raise SystemExit(f"--runtime {args.runtime}: not available here: {reason}")
    with open_session(args.runtime) as session:
        return _run(session, args)


def refuse_what_cannot_run(args: argparse.Namespace) -> None:
    """Every size the command line asks for, checked before a runtime starts: a
    configuration no kernel can run is refused with the option to change, one a variant
    does not support with the variant. Where the command line leaves sizes to the
    adapter's defaults (GPU_DEFAULTS, CPU_DEFAULTS), it is refused only if it fails with
    both; the device's own limits are checked per size later, once it is known."""
    variants = [VARIANTS[n] for n in _variant_names(args.variant)]
    if why := shader_dir_refusal(args.shaders, [v.name for v in variants]):
        raise SystemExit(f"--shaders: {why}")
    refusals = [_first_refusal(args, variants, d) for d in (GPU_DEFAULTS, CPU_DEFAULTS)]
    if all(refusals):
        raise SystemExit(refusals[0])


def _first_refusal(args: argparse.Namespace, variants: list, defaults: dict) -> str | None:
    from ...config import ConfigError, validate

    seqs = [max(args.lengths)] if args.lengths else args.seq or _ints(defaults["seq"])
    seqs = [*seqs, *([args.verify_seq] if args.verify and args.verify_seq else [])]
    dims = args.head_dim or _ints(defaults["head_dim"])
    heads = args.heads or defaults["heads"]
    for s, d, causal in itertools.product(seqs, dims, CAUSALS[args.causal]):
        try:
            cfg = _config(args, heads, s, d, causal)
            validate(cfg)
        except ConfigError as exc:
            if args.lengths and exc.argument in ("seq_q", "seq_k"):
                return f"--lengths: the longest sequence {exc.detail}"
            return f"{OPTION_OF.get(exc.argument, exc.argument)}: {exc.detail}"
        for v in variants:
            if why := v.refusal(cfg):
                return f"--variant {v.name}: {why}"
    return None


def _run(session: Session, args: argparse.Namespace) -> int:
    adapter = session.adapter()
    info, limits = adapter["info"], adapter["limits"]
    timestamps = "timestamp-query" in adapter["features"]
    kind = _adapter_type(info)
    defaults = CPU_DEFAULTS if kind == "CPU" else GPU_DEFAULTS
    seqs = [max(args.lengths)] if args.lengths else args.seq or _ints(defaults["seq"])
    dims = args.head_dim or _ints(defaults["head_dim"])
    heads = args.heads or defaults["heads"]
    args.runs = args.runs or defaults["runs"]
    causals = CAUSALS[args.causal]
    variants = [VARIANTS[n] for n in _variant_names(args.variant)]
    unit, unit_name = (1e9, "GFLOP/s") if kind == "CPU" else (1e12, "TFLOP/s")
    print(
        f"# {args.runtime}: {info.get('vendor')} {info.get('device') or info.get('description')} "
        f"({kind or 'unknown type'}; {info.get('backend')}); timestamps: {timestamps}"
    )

    torch, tdev, why = (None, None, "--no-torch") if args.no_torch else torch_setup()
    if why:
        print(f"# torch: {why}")
    compile_ms = {}
    for v in variants:  # all head_dim specialisations, on a device that has compiled nothing
        request = {"variant": v.name, "sources": shader_sources(args.shaders)}
        compile_ms[v.name] = session.call("compile_kernels", request)["compile_ms"]
        print(f"# {v.name}: pipelines compiled in {compile_ms[v.name]:.0f} ms")
    print(
        f"# median of {args.runs} runs after {args.warmup} warm-up runs and >= "
        f"{args.warmup_ms:g} ms (the first size also once before, discarded); "
        f"rates in {unit_name}; "
        "x torch = time / torch's time"
    )
    print(
        f"{'impl':<12} {'seq':>6} {'D':>4} {'causal':>6} {'fwd ms':>10} {'fwd rate':>9} "
        f"{'bwd ms':>10} {'bwd rate':>9} {'fwd/torch':>9} {'bwd/torch':>9}  timing"
    )
    out_rows, skipped, verify = [], [], []
    _discarded_first(session, variants, seqs, dims, causals, heads, args, limits)
    for d in dims:
        for causal in causals:
            for s in seqs:
                cfg = _config(args, heads, s, d, causal)
                if why := _unfit(cfg, limits):
                    skipped.append({"seq": s, "head_dim": d, "causal": causal, "why": why})
                    print(f"# skip seq {s} D {d}: {why}")
                    continue
                rows, torch_row = _measure(session, cfg, variants, torch, tdev, args, skipped)
                for r in rows:
                    print(format_row(r, cfg, torch_row, unit), flush=True)
                    if passes := r.extra.get("pass_ms"):
                        print("#   " + ", ".join(f"{k} {ms:.3f}" for k, ms in passes.items()))
                    out_rows.append(_row_json(r, cfg, torch_row))
    if args.verify:
        verify = _verify(
            session, variants, args.verify_seq or min(seqs), dims, causals, heads, args, limits
        )
    _overheads(out_rows, compile_ms)
    nothing = not {r["impl"] for r in out_rows} & {v.name for v in variants}
    if nothing:
        print("# nothing measured: every size was skipped or failed (above)")
    meta = {
        "runtime": args.runtime,
        "adapter": info,
        "limits": limits,  # what the backward's split follows (runner.Split): roofline reads it
        "adapter_type": kind,
        "timestamps": timestamps,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": getattr(torch, "__version__", None),
        "torch_device": str(tdev) if tdev is not None else None,
        "args": _recorded_args(args),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    doc = {
        "meta": meta,
        "compile_ms": compile_ms,
        "rows": out_rows,
        "skipped": skipped,
        "verify": verify,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1))
    print(f"# results written to {args.json}")
    if args.plot:
        write_svg(Path(args.plot), out_rows, title=f"{info.get('device') or info.get('vendor')}")
        print(f"# plot written to {args.plot}")
    return 1 if nothing or any(not r["passed"] for r in verify) else 0


def _measure(session, cfg, variants, torch, tdev, args, skipped) -> tuple[list[Row], Row | None]:
    """Rows for one size: torch (first: the others' ratios need it), NumPy, the variants."""
    x = make_inputs(cfg, logits=args.logits, mask=args.mask)
    rows: list[Row] = []
    torch_row = None
    if torch is not None and not cfg.varlen:  # SDPA has no variable-length batches
        torch_row = _guard(skipped, "torch", bench_torch, torch, tdev, cfg, x, args)
        rows += [torch_row] if torch_row else []
        if tdev.type == "cuda" and any(v.dtypes for v in variants):  # beside an f16 variant
            half = _guard(skipped, "torch-f16", bench_torch, torch, tdev, cfg, x, args, True)
            rows += [half] if half else []
    if cfg.seq_q <= args.numpy_max_seq and not cfg.varlen:
        r = _guard(skipped, "numpy", bench_numpy, cfg, x, args)
        rows += [r] if r else []
    for v in variants:
        try:
            rows.append(bench_variant(session, v, cfg, x, args))
        except Exception as exc:  # one failure must not end the table
            skipped.append(
                {"impl": v.name, "seq": cfg.seq_q, "head_dim": cfg.head_dim, "why": repr(exc)}
            )
            print(f"# {v.name} seq {cfg.seq_q} D {cfg.head_dim}: {type(exc).__name__}: {exc}")
    return rows, torch_row


def _config(
    args: argparse.Namespace, heads: int, seq: int, d: int, causal: bool
) -> AttentionConfig:
    """One benchmarked size (Sq = Sk = seq, or Sk = --seq-k) with the command line's feature
    options; with --lengths, the variable-length batch of those sequences instead (seq: the
    longest)."""
    batch, cu = args.batch, None
    if args.lengths:
        batch, cu = len(args.lengths), cu_seqlens(args.lengths)
    seq_k = args.seq_k or seq
    return AttentionConfig(
        batch,
        heads,
        seq,
        seq_k,
        d,
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
        num_kv_heads=args.kv_heads,
        causal=causal,
        causal_offset=args.causal_offset or 0,
        window_left=args.window_left,
        window_right=args.window_right,
        softcap=args.softcap,
        alibi_shape=alibi_shape(args.alibi, batch, heads),
        mask_shape=mask_shape(args.mask, batch, heads, seq, seq_k),
        dropout_p=args.dropout,
        seed=DROPOUT_SEED,
    )


def _discarded_first(session, variants, seqs, dims, causals, heads, args, limits) -> None:
    """Time the first size once and drop it: on the H200 the first size timed in a fresh
    process sometimes ran 5x slow through every run and 300 ms of warm-up (not a clock
    ramp); the sizes after it never did. Not for a size the device cannot hold (its inputs
    alone could take gigabytes of host memory; the table skips it)."""
    cfg = _config(args, heads, min(seqs), min(dims), causals[0])
    if not variants or _unfit(cfg, limits):
        return
    try:
        x = make_inputs(cfg, logits=args.logits, mask=args.mask)
        bench_variant(session, variants[0], cfg, x, args)
    except Exception as exc:  # the table's own run reports it
        print(f"# discarded first measurement failed: {type(exc).__name__}: {exc}")


def _verify(session, variants, seq, dims, causals, heads, args, limits) -> list[dict]:
    """--verify: each variant judged at one size; one the device cannot hold fails."""
    out = []
    for v in variants:
        for d in dims:
            for causal in causals:
                cfg = _config(args, heads, seq, d, causal)
                if why := _unfit(cfg, limits):
                    res = {"variant": v.name, "seq": seq, "head_dim": d, "causal": causal}
                    res |= {"passed": False, "reports": [f"not run: {why}"]}
                else:
                    x = make_inputs(cfg, seed=1, logits=args.logits, mask=args.mask)
                    large = args.logits != "normal"
                    res = verify_variant(session, v, cfg, x, args.shaders, large_scores=large)
                out.append(res)
                verdict = "PASS" if res["passed"] else "FAIL"
                print(f"# verify {v.name} seq {seq} D {d} causal {causal}: {verdict}")
                for line in res["reports"]:
                    print(f"#   {line}")
    return out


def _unfit(cfg: AttentionConfig, limits: dict) -> str | None:
    """Why this device cannot run the size (None: it can), before its inputs are drawn."""
    from ...config import ConfigError, validate
    from ...sizing import validate_sizes

    try:
        validate(cfg)
        validate_sizes(cfg, limits)
    except ConfigError as exc:
        return str(exc)
    return None


def _variant_names(spec: str) -> list[str]:
    """--variant: comma-separated built-in names, or all (variants.parse)."""
    try:
        return variants.parse(spec, VARIANTS)
    except (KeyError, ValueError) as err:
        raise SystemExit(err.args[0]) from None


def _guard(skipped: list, impl: str, fn, *args) -> Row | None:
    """fn(*args), or None with the error recorded (e.g. out of memory at the largest size)."""
    cfg = next(a for a in args if isinstance(a, AttentionConfig))
    try:
        return fn(*args)
    except Exception as exc:  # one failure must not end the table
        skipped.append({"impl": impl, "seq": cfg.seq_q, "head_dim": cfg.head_dim, "why": repr(exc)})
        print(f"# {impl} seq {cfg.seq_q} D {cfg.head_dim}: {type(exc).__name__}: {exc}")
        return None


def _overheads(rows: list[dict], compile_ms: dict[str, float]) -> None:
    print("# harness overhead (WebGPU variants): compile, and wall time beyond GPU time")
    for name, ms in compile_ms.items():
        mine = [r for r in rows if r["impl"] == name]
        if not mine:
            continue
        disp = statistics.median(
            r["extra"][k]
            for r in mine
            for k in ("fwd_dispatch_overhead_ms", "bwd_dispatch_overhead_ms")
        )
        case = statistics.median(r["extra"]["case_overhead_ms"] for r in mine)
        fresh = statistics.median(r["extra"]["case_fresh_overhead_ms"] for r in mine)
        print(
            f"#   {name}: compile {ms:.0f} ms; per dispatch (submit + wait) {disp:.2f} ms median; "
            f"per full case (validate, upload, readback) {case:.1f} ms median, "
            f"{fresh:.1f} ms on new buffers"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m py_harness bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--runtime",
        default="wgpu",
        choices=list(RUNTIMES),
        help="where the kernels run (default wgpu); each times them inside itself",
    )
    ap.add_argument(
        "--variant", default="seed,fast", help=f"comma-separated, or all: {', '.join(VARIANTS)}"
    )
    ap.add_argument(
        "--seq",
        type=positive_ints,
        help=f"sequence lengths (Sq = Sk); default {GPU_DEFAULTS['seq']}, "
        f"{CPU_DEFAULTS['seq']} on a CPU adapter",
    )
    ap.add_argument(
        "--head-dim",
        type=positive_ints,
        help=f"default {GPU_DEFAULTS['head_dim']} ({CPU_DEFAULTS['head_dim']} on CPU)",
    )
    ap.add_argument(
        "--seq-k",
        type=positive_int,
        help="the keys' length instead of Sq (cross-attention; --seq is then Sq); with "
        "causal, --causal-offset too",
    )
    ap.add_argument("--causal", default="both", choices=["both", "yes", "no"])
    ap.add_argument(
        "--causal-offset",
        type=int,
        help="query i sits at key position i + N (may be < 0; default 0, top-left; "
        "FlashAttention-2's bottom-right is Sk - Sq); torch gets the same edge as an "
        "explicit mask",
    )
    ap.add_argument(
        "--mask",
        choices=MASKS,
        default="none",
        help="an additive mask, drawn as the matrix's: keypad [B, 1, 1, Sk] (the last 3 + 7 b "
        "keys -inf) or full [Sq, Sk] (normal); torch gets it as attn_mask",
    )
    ap.add_argument("--batch", type=positive_int, default=1)
    ap.add_argument(
        "--lengths",
        type=naturals,
        help="a variable-length batch (cu_seqlens) of these sequence lengths, Sq = Sk each, "
        "instead of --seq and --batch (e.g. 1024,256,768,512,128,640,384,384); no torch or "
        "NumPy rows: compare with --seq of their sum",
    )
    ap.add_argument(
        "--heads",
        type=positive_int,
        help=f"default {GPU_DEFAULTS['heads']} ({CPU_DEFAULTS['heads']} on CPU)",
    )
    ap.add_argument(
        "--kv-heads", type=positive_int, help="default: --heads (torch gets K/V repeated)"
    )
    ap.add_argument(
        "--runs",
        type=positive_int,
        help=f"timed runs; default {GPU_DEFAULTS['runs']} ({CPU_DEFAULTS['runs']} on CPU)",
    )
    ap.add_argument("--warmup", type=natural, default=2)
    ap.add_argument(
        "--warmup-ms",
        type=float,
        default=300.0,
        help="keep warming up (per variant, size and direction) until this much wall time",
    )
    # FlashAttention-2's axes (docs/features.md); torch's SDPA has no such options, so its
    # column stays the plain attention of the same size
    ap.add_argument("--softcap", type=float, default=0.0, help="softcap of the kernels (0: off)")
    ap.add_argument("--window-left", type=int, default=-1, help="window_left (-1: unbounded)")
    ap.add_argument("--window-right", type=int, default=-1, help="window_right (-1: unbounded)")
    ap.add_argument(
        "--alibi",
        choices=("none", "head", "batch"),
        default="none",
        help="ALiBi slopes: one per head, or per batch element and head (default: none)",
    )
    ap.add_argument(
        "--dropout",
        type=float,
        default=0.0,
        help=f"dropout probability of the kernels (seed {DROPOUT_SEED}; torch is timed without it)",
    )
    ap.add_argument(
        "--logits",
        choices=LOGITS,
        default="normal",
        help="big: FlashAttention's overflow test (q x 5, k and v x 3); shifted: each row's "
        "scores moved by about +-150, past exp's float32 range (the matrix's `shift` cases)",
    )
    ap.add_argument("--no-torch", action="store_true", help="skip torch even if installed")
    ap.add_argument(
        "--numpy-max-seq", type=natural, default=1024, help="time NumPy only up to this seq"
    )
    ap.add_argument("--verify", action="store_true", help="judge one size against float64 NumPy")
    ap.add_argument(
        "--judge-workers",
        type=positive_int,
        help="threads --verify's float64 reference and baselines use (default: one per core)",
    )
    ap.add_argument(
        "--verify-seq", type=positive_int, help="the size --verify uses (default: the smallest)"
    )
    ap.add_argument("--shaders", type=Path, default=SHADER_DIR, help="folder with the .wgsl files")
    ap.add_argument("--json", type=Path, default=output_dir() / "bench.json")
    ap.add_argument(
        "--plot", default=str(output_dir() / "bench.svg"), help="SVG path ('' for none)"
    )
    return run(ap.parse_args(argv))
