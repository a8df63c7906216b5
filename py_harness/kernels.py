"""The kernels' entry points, bindings and dispatch geometry, declared in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import AttentionConfig

ROWS_PER_WORKGROUP = 128  # FA2_ROWS / FAB_ROWS in the shaders
RO = "read-only-storage"  # GPUBufferBindingType names
RW = "storage"
UNIFORM = "uniform"


@dataclass(frozen=True)
class Kernel:
    entry_point: str
    module: str  # "forward" or "backward" (see shaders.py for how modules compose)
    # binding number -> (buffer name, GPUBufferBindingType); only what the entry uses.
    # The pipeline layout is built from this (not "auto"), so an edit that stops using a
    # binding still gets a valid layout, and the storage-buffer count stays exact.
    bindings: dict[int, tuple[str, str]]
    rows: str  # the sequence each workgroup tiles: "seq_q" or "seq_k"
    heads: str  # "num_heads" or "kv_heads": workgroups along z = batch * heads

    @property
    def layout(self) -> tuple[tuple[int, str], ...]:
        return tuple((i, kind) for i, (_, kind) in sorted(self.bindings.items()))

    def workgroups(self, cfg: AttentionConfig) -> tuple[int, int, int]:
        rows = getattr(cfg, self.rows)
        heads = getattr(cfg, self.heads)
        return (1, math.ceil(rows / ROWS_PER_WORKGROUP), cfg.batch * heads)


FORWARD = Kernel(
    "flash_fwd",
    "forward",
    {
        0: ("q", RO),
        1: ("k", RO),
        2: ("v", RO),
        3: ("o", RW),
        4: ("lse", RW),
        8: ("params", UNIFORM),
        9: ("mask", RO),
    },
    "seq_q",
    "num_heads",
)
BACKWARD_DQ = Kernel(
    "flash_bwd_dq",
    "backward",
    {
        0: ("q", RO),
        1: ("k", RO),
        2: ("v", RO),
        3: ("o", RO),
        4: ("d_out", RO),
        5: ("dq", RW),
        8: ("params", UNIFORM),
        9: ("mask", RO),
        10: ("stats", RW),
    },
    "seq_q",
    "num_heads",
)
BACKWARD_DK_DV = Kernel(
    "flash_bwd_dk_dv",
    "backward",
    {
        0: ("q", RO),
        1: ("k", RO),
        2: ("v", RO),
        4: ("d_out", RO),
        6: ("dk", RW),
        7: ("dv", RW),
        8: ("params", UNIFORM),
        9: ("mask", RO),
        10: ("stats", RW),
    },
    "seq_k",
    "kv_heads",
)
BACKWARD = (BACKWARD_DQ, BACKWARD_DK_DV)
ALL_KERNELS = (FORWARD, *BACKWARD)
