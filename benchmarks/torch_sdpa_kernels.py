"""Which CUDA kernels torch's float32 scaled_dot_product_attention runs (forward and
backward), by name from torch.profiler. Run it under Nsight Compute to see which pipes they
use, as docs/records/gpu.md does:

    ncu -k regex:fmha --metrics sm__inst_executed_pipe_tensor_op_hmma.sum,\
smsp__sass_thread_inst_executed_op_ffma_pred_on.sum python3 benchmarks/torch_sdpa_kernels.py \
--seq 1024 --head-dim 64

Benchmark-only (needs torch with CUDA); not used by the harness or the tests.
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=16)
    args = ap.parse_args()
    # After the arguments: --help answers where torch is not installed (tests/test_benchmarks.py).
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.backends.cuda.matmul.allow_tf32 = False  # as bench_impls.torch_setup
    shape = (1, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v).sum().backward()  # warm-up
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, k, v).sum().backward()
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if "fmha" in e.name or "ttention" in e.name})
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {shape}:")
    for name in names:
        print(f"  {name}")


if __name__ == "__main__":
    main()
