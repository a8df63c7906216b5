"""How many loop passes the kernels spend on Mesa's lavapipe, whose loop budget ends them.

gallivm (lavapipe's compiler) gives each SIMD vector of invocations (8 lanes at its default
256-bit width, 4 at LP_NATIVE_VECTOR_WIDTH=128) one loop limiter of 65535
(LP_MAX_TGSI_LOOP_ITERATIONS, Mesa's lp_bld_limits.h), shared by every loop of the shader
and kept across barriers; lp_exec_endloop (lp_bld_ir_common.c) decrements it at the end of
every pass of every loop and goes round again only while some lane is active and the
limiter is > 0. The counting rule, measured with py_harness/probes.py and instrumented
copies of the kernels (docs/verdict.md):

- reaching a loop costs P + 1, P the most passes any lane active on entry needs (0 if none);
- nothing is branched around: a false `if`, a `continue` or the exiting pass only masks
  lanes, so a loop's body runs P + 1 times and each loop inside it is reached P + 1 times;
  a loop reached with no active lane costs 1;
- small constant-count loops with small bodies are unrolled and cost nothing; functions
  count as inlined; once the budget is spent every loop runs one pass more and stops.

A loop's first pass always runs; a later one only while the limiter is above 0. So a
vector's results are right exactly when each pass that does work and is not its loop's
first has at most BUDGET - 1 decrements before it. Every seed entry point ends in a store
loop whose last two decrements do no work, so there that is its whole count C <= BUDGET + 1;
the fast variant's end in loops that do no work (exiting passes, a masked last round), and
its counts are of the passes up to the last working one (`needed`). Counts assume no
additive mask (a mask only removes keys, so they are then upper bounds). The model is of
the kernels in shaders/ as shipped, in both forms of the fast GEMMs' steps (written out, or
loops where the runner sets FF_ROLLED: wgpu-py on lavapipe, not Firefox, `rolled_loops`):
tests/test_limitations.py checks it against lavapipe at measured break points, so an edit
that changes a kernel's loops shows there.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from ...config import AttentionConfig, ConfigError, kernel_window
from ...kernels import FAST, FAST_F16, FAST_F16X2, FAST_ROWS, Variant

BUDGET = 65535  # LP_MAX_TGSI_LOOP_ITERATIONS
OK_LIMIT = BUDGET + 1  # the largest count (for the fast variant: `needed`) still right
SEED_TILE = 16  # FA2_TILE / FAB_TILE: keys or queries staged per step
SEED_ROWS = 128  # FA2_ROWS / FAB_ROWS: rows (and invocations) per workgroup
# lavapipe's maxStorageBufferBindingSize, which caps the fast backward's dQ partial sums
LAVAPIPE_BINDING_CAP = 1 << 27

Span = tuple[int, int]  # [begin, end)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---- visibility as intervals (fa2_visible, fa2_key_range, the dK/dV query range) ----------
# Every rule is one window on d = kj - (qi + causal_offset): -left <= d <= right
# (config.kernel_window, what the kernels read).
def _keys_of_query(qi: int, cfg: AttentionConfig) -> Span:
    if qi >= cfg.seq_q:
        return (0, 0)
    left, right = kernel_window(cfg)
    qa = qi + cfg.causal_offset
    return (max(0, qa - left), max(0, min(cfg.seq_k, qa + right + 1)))


def _queries_of_key(kj: int, cfg: AttentionConfig) -> Span:
    if kj >= cfg.seq_k:
        return (0, 0)
    left, right = kernel_window(cfg)
    base = kj - cfg.causal_offset
    return (max(0, base - right), max(0, min(cfg.seq_q, base + left + 1)))


def key_range(q0: int, q1: int, cfg: AttentionConfig) -> Span:
    """fa2_key_range: keys any query in [q0, q1] may see."""
    return (_keys_of_query(q0, cfg)[0], _keys_of_query(q1, cfg)[1])


def query_range(k0: int, k1: int, cfg: AttentionConfig) -> Span:
    """ff_query_range: queries that may see a key in [k0, k1]."""
    return (_queries_of_key(k0, cfg)[0], _queries_of_key(k1, cfg)[1])


def _union_size(spans: list[Span], base: int) -> tuple[int, int]:
    """(positions in the union of spans, seed tiles [base + 16 t, + 16) holding one)."""
    merged: list[Span] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    tiles: set[int] = set()
    for a, b in merged:
        tiles.update(range((a - base) // SEED_TILE, (b - 1 - base) // SEED_TILE + 1))
    return sum(b - a for a, b in merged), len(tiles)


# ---- the seed variant: per SIMD vector of a 128-invocation workgroup ----------------------
def _seed_load(lid0: int, d4: int) -> int:
    """`for (var i = lid; i < 16 * d4; i += 128u)`: the vector's first lane's passes + 1."""
    n = SEED_TILE * d4
    return (_cdiv(n - lid0, SEED_ROWS) if lid0 < n else 0) + 1


def _seed_key_tiles(q0: int, lid0: int, lanes: int, cfg: AttentionConfig) -> tuple[int, int, int]:
    """A query-row vector's key tiles: (tiles of the workgroup's key range, keys some lane
    sees, tiles holding one)."""
    rows = [q0 + lid0 + i for i in range(lanes)]
    kb, ke = key_range(q0, min(q0 + SEED_ROWS, cfg.seq_q) - 1, cfg)
    tiles = _cdiv(ke - kb, SEED_TILE) if ke > kb else 0
    return (tiles, *_union_size([_keys_of_query(q, cfg) for q in rows], kb))


def _seed_fwd(q0: int, lid0: int, lanes: int, d4: int, cfg: AttentionConfig) -> int:
    tiles, seen, busy = _seed_key_tiles(q0, lid0, lanes, cfg)
    load = _seed_load(lid0, d4)
    c = (d4 + 1) + (tiles + 1)  # Q into registers; the key-tile loop
    c += tiles * (load + 34) + d4 * seen  # per tile: load, the score j loop and its dot loops
    c += busy * (d4 + 35) + d4 * seen  # tiles some lane sees a key of: rescale, P V j loop
    c += (tiles - busy) * 3 + 6  # the rest masked; the tile loop's exiting pass
    return c + (d4 + 1 if q0 + lid0 < cfg.seq_q else 1)  # the store loop, in `if (valid)`


def _seed_dq(q0: int, lid0: int, lanes: int, d4: int, cfg: AttentionConfig) -> int:
    tiles, seen, _ = _seed_key_tiles(q0, lid0, lanes, cfg)
    load = _seed_load(lid0, d4)
    c = d4 + 1  # Q, dO, Delta into registers
    c += tiles + 1 + tiles * (load + 34) + d4 * seen + 3  # sweep 1: the LSE
    c += tiles + 1 + tiles * (load + 51) + 2 * d4 * seen + 4  # sweep 2: dQ
    return c + (d4 + 1 if q0 + lid0 < cfg.seq_q else 1)


def _seed_dkdv(k0: int, lid0: int, lanes: int, d4: int, cfg: AttentionConfig) -> int:
    keys = [k0 + lid0 + i for i in range(lanes)]
    qb, qe = query_range(k0, min(k0 + SEED_ROWS, cfg.seq_k) - 1, cfg)
    qtiles = _cdiv(qe - qb, SEED_TILE) if qe > qb else 0
    seen, _ = _union_size([_queries_of_key(k, cfg) for k in keys], qb)
    group = cfg.num_heads // cfg.kv_heads
    per_head = qtiles + 1 + qtiles * (_seed_load(lid0, d4) + 51) + 2 * d4 * seen + 4
    c = (d4 + 1) + (group + 1) + group * per_head + 5  # K, V in; heads x query tiles
    return c + (d4 + 1 if keys[0] < cfg.seq_k else 1)


def _seed_vectors(rows: int, lanes: int) -> Iterator[tuple[int, int]]:
    for w in range(_cdiv(rows, SEED_ROWS)):
        for lid0 in range(0, SEED_ROWS, lanes):
            yield w * SEED_ROWS, lid0


def seed_counts(cfg: AttentionConfig, lanes: int = 8) -> dict[str, int]:
    """The largest count C over the SIMD vectors of each seed entry point's dispatch."""
    d4 = _cdiv(cfg.head_dim, 4)
    entries = (
        ("flash_fwd", _seed_fwd, cfg.seq_q),
        ("flash_bwd_dq", _seed_dq, cfg.seq_q),
        ("flash_bwd_dk_dv", _seed_dkdv, cfg.seq_k),
    )
    return {
        entry: max(count(r0, lid0, lanes, d4, cfg) for r0, lid0 in _seed_vectors(rows, lanes))
        for entry, count, rows in entries
    }


# ---- the fast variant: every loop is uniform, so every vector of a workgroup counts alike --
# Each stretch of code is counted as Passes; an entry point's number is `needed`: the
# decrements before its last working pass that is not its loop's first, + 2, which meets
# OK_LIMIT where the seed's whole count does (a seed entry point's last such pass is its
# store loop's, two decrements from the end).
@dataclass(frozen=True)
class Passes:
    """Loop-limiter decrements of a stretch of kernel code: `count` in all; `last`, those
    before its last working pass that is not its loop's first (None: it has none); and
    `masked`, its count when reached with no lane active (each loop once, inner ones too)."""

    count: int = 0
    last: int | None = None
    masked: int = 0

    def then(self, other: Passes) -> Passes:
        last = self.last if other.last is None else self.count + other.last
        return Passes(self.count + other.count, last, self.masked + other.masked)


NOTHING = Passes()


def _loop(bodies: list[Passes], shape: Passes = NOTHING, exits: bool = True) -> Passes:
    """A loop that runs `bodies`, each pass ending in a decrement; then, where `exits`, the
    pass that leaves it, with the body (`shape`, as any pass's) reached with no lane
    active. Where not, the last body leaves mid-pass (a `break`), its decrement the last."""
    count, last = 0, None
    for i, body in enumerate(bodies):
        if i:
            last = count
        if body.last is not None:
            last = count + body.last
        count += body.count + 1
    if exits:
        count += shape.masked + 1
    return Passes(count, last, shape.masked + 1)


def needed(p: Passes) -> int:
    """The count that must stay within OK_LIMIT for every working pass to run."""
    return 0 if p.last is None else p.last + 2


def _fast_shape(head_dim: int) -> tuple[int, int, int]:
    """(head_dim chunks of 32, ff_pv_tile passes over a full tile, rows per ff_pv_step)."""
    vk = 16 if head_dim <= 64 else 8
    return _cdiv(head_dim, 32), FAST_ROWS // (2 * vk), vk


def _score_tile(chunks: int, unrolled: bool) -> Passes:
    """ff_score_tile: its loop over head_dim's chunks around ff_scores_chunk's 8 steps, a
    loop of its own where the pass's file does not write them out (FF_UNROLL_SCORES)."""
    steps = NOTHING if unrolled else _loop([NOTHING] * 8)
    return _loop([steps] * chunks, steps)


def _pv_tile(rows_left: int, passes: int, vk: int, rolled: bool) -> Passes:
    """ff_pv_tile over an operand with rows_left >= 1 rows: passes of 2 vk rows, with a
    `break` at the top of a pass past the rows and one between its two halves, each half
    ff_pv_step's FF_VK / 4 steps: written out, or a loop the compiler unrolls, or where
    `rolled` a loop of its own (ff_trips hides its count from the compiler)."""
    return _pv_tile_of(min(rows_left, FAST_ROWS), passes, vk, rolled)


@functools.cache  # a few shapes, asked for millions of times over a long sequence's tiles
def _pv_tile_of(rows: int, passes: int, vk: int, rolled: bool) -> Passes:
    halves = min(_cdiv(rows, vk), 2 * passes)
    step = _loop([NOTHING] * (vk // 4)) if rolled else NOTHING
    both = step.then(step)
    bodies = [both] * (halves // 2) + [step] * (halves % 2)
    return _loop(bodies, both, exits=halves % 2 == 0)


# Which of the fast variant's passes write ff_scores_chunk's steps out (FF_UNROLL_SCORES in
# fa2_fast_forward.wgsl and fa2_fast_backward.wgsl), by family (its largest head_dim), where
# the runner does not keep them loops (FF_ROLLED: `rolled` below).
SCORES_WRITTEN_OUT = {"forward": {64, 128, 256}, "backward": {128, 256}}


def rolled_loops(adapter: str) -> bool:
    """Whether the runner keeps the GEMMs' steps as loops on this lavapipe adapter, by the
    name the host gives it (gpu/device.rolls_loops decides from the page's adapter.info).
    It does, except in Firefox: its page sees an empty adapter.info, so it runs the steps
    written out, and the host names its adapter 'firefox/wgpu ...' (runtimes/firefox.py)."""
    return not adapter.startswith("firefox/")


def _family(head_dim: int) -> int:
    """The head_dim bound of the family FAST.for_head_dim picks (limits aside)."""
    return next(bound for bound, _ in FAST.by_head_dim if head_dim <= bound)


def _written_out(pass_: str, head_dim: int, rolled: bool) -> bool:
    return not rolled and _family(head_dim) in SCORES_WRITTEN_OUT[pass_]


def _fast_fwd(q0: int, cfg: AttentionConfig, rolled: bool) -> Passes:
    chunks, passes, vk = _fast_shape(cfg.head_dim)
    score = _score_tile(chunks, _written_out("forward", cfg.head_dim, rolled))
    kb, ke = key_range(q0, min(q0 + FAST_ROWS, cfg.seq_q) - 1, cfg)
    tiles = [
        score.then(_pv_tile(cfg.seq_k - k0, passes, vk, rolled)) for k0 in range(kb, ke, FAST_ROWS)
    ]
    return _loop(tiles, score.then(_pv_tile(FAST_ROWS, passes, vk, rolled)))


# Per key-tile pass: which GEMMs one query tile runs (score tiles, pv tiles over Q/dO rows,
# pv tiles over K rows), in that order.
_KEY_PASSES = {
    "fa2f_bwd_dk_dv": (2, 2, 1),  # one pass (the 64 and 256 families): S and dP; dV, dK; dQ
    "fa2f_bwd_dv": (1, 1, 0),  # two passes (the 128 family): S; dV
    "fa2f_bwd_dk_dq": (2, 1, 1),  # ... and S and dP; dK; dQ
}


def _fast_key_pass(
    entry: str,
    slot: int,
    slots: int,
    cfg: AttentionConfig,
    part: int = 0,
    parts: int = 1,
    rolled: bool = False,
) -> Passes:
    """ffb_key_tiles of workgroup `slot` of `slots`, part `part` of `parts` of each key tile:
    key tiles slot, 2 slots - 1 - slot, ...; of each, for every head of the group, the query
    tiles of the tile's range that are the part's (ffb_first_tile: every tile from the
    range's start with one part; else aligned tiles, tile j of head g in part (g + j) %
    parts). The round order's alternation is modelled as strict: an upper bound of a few
    tiles either way."""
    chunks, passes, vk = _fast_shape(cfg.head_dim)
    scores, pv_q, pv_k = _KEY_PASSES[entry]
    score = _score_tile(chunks, _written_out("backward", cfg.head_dim, rolled))

    @functools.cache  # one per (rows of a last or whole tile, key rows)
    def query_tile_of(query_rows: int, key_rows: Passes) -> Passes:
        out = NOTHING
        pv = _pv_tile(query_rows, passes, vk, rolled)
        for p in [score] * scores + [pv] * pv_q + [key_rows] * pv_k:
            out = out.then(p)
        return out

    def query_tile(query_rows: int, key_rows: Passes) -> Passes:
        return query_tile_of(min(query_rows, FAST_ROWS), key_rows)

    full = query_tile(FAST_ROWS, _pv_tile(FAST_ROWS, passes, vk, rolled))  # the bodies' shape
    query_loop = _loop([], full)  # reached with no lane active: each loop once
    head_loop = _loop([], query_loop)
    group = cfg.num_heads // cfg.kv_heads
    rounds: list[Passes] = []
    while len(rounds) * slots * FAST_ROWS < cfg.seq_k:
        rnd = len(rounds)
        k0 = (rnd * slots + (slots - 1 - slot if rnd & 1 else slot)) * FAST_ROWS
        if k0 >= cfg.seq_k:  # leaves the loop as its exiting pass would
            break
        key_rows = _pv_tile(cfg.seq_k - k0, passes, vk, rolled)
        qb, qe = query_range(k0, min(k0 + FAST_ROWS, cfg.seq_k) - 1, cfg)
        j = qb // FAST_ROWS  # the aligned tile holding the range's start
        heads = []
        for g in range(group):
            first = qb if parts == 1 else (j + (part - g - j) % parts) * FAST_ROWS
            tiles = range(first, qe if qe > qb else 0, parts * FAST_ROWS)
            heads.append(_loop([query_tile(cfg.seq_q - q0, key_rows) for q0 in tiles], full))
        rounds.append(_loop(heads, query_loop))
    return _loop(rounds, head_loop)


def fast_counts(
    cfg: AttentionConfig, kv_parts: int | None = None, rolled: bool = False, fast: Variant = FAST
) -> dict[str, int]:
    """The largest count (`needed`) over the workgroups of each fast entry point's
    dispatch, with the parts per key tile the runner chooses (Variant.kv_parts) or `kv_parts`,
    and the score steps written out or, where `rolled`, kept loops (FF_ROLLED). fast: the
    variant of these kernels (fast_f16 splits no key tile into parts)."""
    chosen = fast.for_head_dim(cfg.head_dim)
    try:
        band = chosen.dq_band_rows(cfg, LAVAPIPE_BINDING_CAP)
        slots = chosen.dq_slots(cfg, LAVAPIPE_BINDING_CAP, band)
    except ConfigError:  # refused before any GPU work: nothing runs
        return {}
    parts = kv_parts or chosen.kv_parts(cfg, LAVAPIPE_BINDING_CAP, band)
    if cfg.varlen:  # each workgroup walks its own sequence: the largest count of any
        out: dict[str, int] = {}
        for _, len_q, _, len_k in cfg.sequences():
            if len_q and len_k:
                one = cfg.dense_sequence(len_q, len_k)
                counts = _fast_dense_counts(one, slots, parts, chosen, band, rolled)
                for entry, c in counts.items():
                    out[entry] = max(out.get(entry, 0), c)
        return out
    return _fast_dense_counts(cfg, slots, parts, chosen, band, rolled)


def _fast_dense_counts(
    cfg: AttentionConfig, slots: int, parts: int, chosen: Variant, band: int, rolled: bool
) -> dict[str, int]:
    tiles = _cdiv(cfg.seq_k, FAST_ROWS)
    if band:  # the key tiles a row sees: left + right + 1 keys, over one more tile at most
        left, right = kernel_window(cfg)
        sums = min(tiles, _cdiv(left + right + 1, FAST_ROWS) + 1)
    else:
        sums = slots
    out = {
        "fa2f_fwd": max(
            needed(_fast_fwd(q0, cfg, rolled)) for q0 in range(0, cfg.seq_q, FAST_ROWS)
        ),
        "fa2f_bwd_pre": needed(_loop([NOTHING] * _cdiv(cfg.head_dim, 4))),  # over head_dim
        "fa2f_bwd_dq_sum": needed(_loop([NOTHING] * sums)),  # the partial sums (band: tiles)
        "fa2f_bwd_kv_sum": needed(_loop([NOTHING] * (parts - 1))),  # the copies of dK, dV
    }
    for kernel in chosen.backward:  # the chosen family's key-tile pass(es)
        if kernel.entry_point not in _KEY_PASSES:
            continue
        # the dV pass (rows seq_k) takes one key tile per workgroup; the others, a slot's
        n = tiles if kernel.rows == "seq_k" else slots
        out[kernel.entry_point] = max(
            needed(_fast_key_pass(kernel.entry_point, s, n, cfg, p, parts, rolled))
            for s in range(n)
            for p in range(parts)
        )
    return out


# The variants of the fast kernels the model counts, by name. fast_f16x2's score GEMMs
# (fa2_fast_f16x2.wgsl) stage chunks of 64, half as many as counted here, and write their
# steps out unless rolled: the model over-counts them, so it may call a case unsupported
# that would have run, never the other way round.
FAST_FORMS = {"fast": FAST, "fast_f16": FAST_F16, "fast_f16x2": FAST_F16X2}
MODELLED = ("seed", *FAST_FORMS)


def loop_counts(
    variant: str,
    cfg: AttentionConfig,
    lanes: int = 8,
    kv_parts: int | None = None,
    rolled: bool = False,
) -> dict[str, int]:
    """Each entry point's largest count per SIMD vector of `lanes`; {} for a variant this
    model does not know. kv_parts: the fast backward's parts per key tile, if not the
    runner's choice; rolled: whether the runner keeps the fast GEMMs' steps as loops
    (`rolled_loops` of the adapter)."""
    if variant == "seed":
        return seed_counts(cfg, lanes)
    if variant in FAST_FORMS:
        return fast_counts(cfg, kv_parts, rolled, FAST_FORMS[variant])
    return {}


def over_budget(
    variant: str, cfg: AttentionConfig, lanes: int = 8, rolled: bool = False
) -> dict[str, int]:
    """The entry points whose count passes the budget (their results are cut short)."""
    counts = loop_counts(variant, cfg, lanes, rolled=rolled)
    return {e: c for e, c in counts.items() if c > OK_LIMIT}


def lanes_of(adapter: str) -> int:
    """lavapipe's SIMD width from its adapter name ("... 256 bits ..." -> 8 lanes of f32)."""
    for bits in (512, 256, 128):
        if f"{bits} bits" in adapter:
            return bits // 32
    return 8
