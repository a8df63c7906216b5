"""A case matrix generated inside a variant's envelope (envelope.py).

The fixed matrix (cases.py) is written for the built-in kernels: most of its cases use
features or shapes a team's kernel never claimed (cross-attention, GQA, windows, masks),
and few of those it keeps would probe the kernel's own tiles. A variant that declares an
envelope is judged on cases drawn from axes filtered by it: a control case, then every
value each axis allows among awkward sizes (1, primes, tails, tile edges and their
multiples, each range's extremes), then seeded combinations up to the matrix's size, each
case inside the envelope and small enough for a CPU adapter. The same variant always gets
the same cases (ids included), so a failure replays with `--case ID`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import replace

from ...envelope import Envelope
from ...variant import Variant
from .cases import CASES, Case

# Sequence lengths worth probing: 1, tiny primes, both sides of the usual tiles, and
# multiples of 64 for kernels that need whole tiles. Envelope.tiles adds its own edges.
SEQ_CANDIDATES = (
    1, 2, 3, 5, 7, 16, 17, 31, 32, 33, 63, 64, 65, 100, 113, 127, 128, 129, 192,
    203, 255, 256, 257, 300, 320, 384, 448, 512,
)  # fmt: skip
HEAD_DIM_CANDIDATES = (1, 3, 8, 16, 17, 31, 32, 48, 59, 64, 80, 111, 128, 160, 201, 256)
BATCH_CANDIDATES = (1, 2, 3)
HEAD_CANDIDATES = (1, 2, 4, 6, 8)
GROUP_CANDIDATES = (1, 2, 3, 4)
# A case's size: batch x heads x seq_q x seq_k x head_dim at most this (about 4 M scores x
# head_dim products per GEMM: a second or two of SwiftShader for a whole case).
WORK_BUDGET = 1 << 22
# How many cases a generated matrix holds per causal setting at least (more where covering
# every axis value takes more), and how many of them are in the smoke subset.
MATRIX_SIZE = 36
SMOKE_SIZE = 12
_SEED = 20261207  # the draw of combinations: fixed, so ids are stable
# A few cases per feature a variant supports beyond causal and GQA: the settings added to
# a drawn base case.
FEATURE_SETTINGS: dict[str, tuple[dict[str, object], ...]] = {
    "window": ({"window": 17}, {"window": 1}),
    "causal_offset": ({"offset": 5, "causal": True}, {"offset": 20, "window": 8}),
    "bottom_right": ({"bottom_right": True, "causal": True},),
    "window_lr": ({"window_left": 5, "window_right": 40}, {"window_left": 0, "window_right": 0}),
    "mask": ({"mask": "full"}, {"mask": "keypad"}),
    "dropout": ({"dropout_p": 0.17},),
    "softcap": ({"softcap": 5.0},),
    "alibi": ({"alibi": "head"},),
}


def generated_cases(variant: Variant, size: int = MATRIX_SIZE) -> tuple[Case, ...]:
    """The variant's generated matrix: for each causal setting the envelope allows, at
    least `size` cases where that many exist, covering every value each other axis allows
    (a kernel that is causal or not is judged as thoroughly either way); the control case
    first, then the settings' cases in turn, so the first SMOKE_SIZE (the smoke subset)
    hold both."""
    env = variant.envelope or Envelope()
    axes = _axes(variant, env)
    fits = _inside(variant)
    made: dict[str, Case] = {}
    control = _control(axes, fits)
    if control is not None:
        made[control.id] = control
    groups = [_group(variant, axes, fits, bool(causal), size, made) for causal in axes["causal"]]
    cases = ([control] if control else []) + [
        c for turn in itertools.zip_longest(*groups) for c in turn if c is not None
    ]
    return tuple(replace(c, smoke=i < SMOKE_SIZE) for i, c in enumerate(cases))


def _group(
    variant: Variant,
    axes: dict[str, list[object]],
    fits: Callable[[Case], bool],
    causal: bool,
    size: int,
    made: dict[str, Case],
) -> list[Case]:
    """One causal setting's cases (new to `made`, which they join): every value of the other
    axes, each supported feature, then seeded combinations up to `size` in all."""
    mine = {**axes, "causal": [causal]}
    group: list[Case] = [c for c in made.values() if c.causal == causal]
    start = len(group)

    def add(case: Case | None) -> bool:
        if case is None or case.id in made:
            return False
        made[case.id] = case
        group.append(case)
        return True

    for name, values in mine.items():
        for value in values:
            if not any(_value(c, name) == value for c in group):
                add(_with(mine, fits, {name: value}, salt=f"{causal}:{name}={value}"))
    for feature, settings in FEATURE_SETTINGS.items():
        for i, extra in enumerate(settings):
            if feature in variant.supports:
                add(_with(mine, fits, {}, salt=f"{causal}:{feature}{i}", extra=extra))
    rng = random.Random(f"{_SEED}:{causal}")
    misses = 0
    while len(group) < size and misses < 100:  # an envelope with few cases runs out
        misses = 0 if add(_with(mine, fits, {}, salt=str(rng.random()), tries=30)) else misses + 1
    return group[start:]


def matrix(variant: Variant) -> tuple[Case, ...]:
    """The cases a variant is judged on: the fixed matrix for one without an envelope (cases
    it does not support are skipped there, with the reason); for one with an envelope, the
    fixed matrix's cases inside it, then its generated ones."""
    if variant.envelope is None:
        return CASES
    fits = _inside(variant)
    fixed = [c for c in CASES if fits(c)]
    ids = {c.id for c in fixed}
    return (*fixed, *(c for c in generated_cases(variant) if c.id not in ids))


def outside(variant: Variant, cases: Iterable[Case] = CASES) -> list[tuple[str, str]]:
    """(id, why) of the cases outside the variant's envelope: never run, never red."""
    out = []
    for c in cases:
        why = variant.outside(c.config())
        if why:
            out.append((c.id, why))
    return out


def _inside(variant: Variant) -> Callable[[Case], bool]:
    def fits(case: Case) -> bool:
        try:
            cfg = case.config()
        except (ValueError, TypeError):
            return False
        return variant.refusal(cfg) is None

    return fits


def _axes(variant: Variant, env: Envelope) -> dict[str, list[object]]:
    """Each axis's candidate values that the envelope allows (and the variant supports)."""
    extra_seqs = {e for t in env.tiles for e in (t - 1, t, t + 1, 2 * t - 1, 2 * t, 2 * t + 1)}

    def allowed(name: str, candidates: Iterable[int], cap: int) -> list[object]:
        axis = env.axis(name)
        pool = set(axis.values) if axis.values else set(candidates) | {axis.lo}
        if not axis.values and axis.hi <= cap:
            pool.add(axis.hi)
        return sorted(n for n in pool if 1 <= n <= cap and axis.allows(n))

    head_dims = allowed("head_dim", HEAD_DIM_CANDIDATES, variant.max_head_dim)
    seqs = sorted(set(SEQ_CANDIDATES) | extra_seqs)
    groups = allowed("group", GROUP_CANDIDATES, 8) if "gqa" in variant.supports else [1]
    causal: list[object] = []
    if env.causal != "required":
        causal.append(False)
    if env.causal != "refused" and "causal" in variant.supports:
        causal.append(True)
    return {
        "head_dim": head_dims,
        "causal": causal,
        "seq_q": allowed("seq_q", seqs, 4096),
        "seq_k": allowed("seq_k", seqs, 4096),
        "group": groups or [1],
        "num_heads": allowed("num_heads", HEAD_CANDIDATES, 64),
        "batch": allowed("batch", BATCH_CANDIDATES, 16),
    }


def _value(case: Case, name: str) -> object:
    if name == "group":
        return case.num_heads // case.num_kv_heads
    return getattr(case, name)


def _control(axes: dict[str, list[object]], fits: Callable[[Case], bool]) -> Case | None:
    """The control case where the envelope allows it (cases.CONTROL), else the case nearest
    it: head_dim and sequences nearest 64 and 128, batch 2, four heads."""

    def near(name: str, target: int) -> list[object]:
        return sorted(axes[name], key=lambda n: (abs(int(n) - target), n))  # type: ignore[arg-type]

    for causal in axes["causal"]:
        for hd in near("head_dim", 64)[:3]:
            for sq in near("seq_q", 128)[:4]:
                for sk in [sq, *near("seq_k", 128)[:4]]:
                    for b in near("batch", 2)[:2]:
                        for h in near("num_heads", 4)[:3]:
                            case = _case(hd, sq, sk, b, h, 1, bool(causal))
                            if case and _cheap(case) and fits(case):
                                return replace(case, repeat_backward=True)
    return None


def _with(
    axes: dict[str, list[object]],
    fits: Callable[[Case], bool],
    fixed: dict[str, object],
    salt: str,
    extra: dict[str, object] | None = None,
    tries: int = 300,
) -> Case | None:
    """A case with the `fixed` axis values and the others drawn (seeded by salt), inside the
    envelope and the work budget; None where `tries` draws find none. Equal sequence
    lengths and heads divisible by the group are tried first: what self-attention and MHA
    kernels need."""
    rng = random.Random(f"{_SEED}:{salt}")
    for attempt in range(tries):
        pick = {n: fixed[n] if n in fixed else rng.choice(v) for n, v in axes.items() if v}
        if len(pick) < len(axes):
            return None
        if "seq_k" not in fixed and attempt % 2 == 0 and pick["seq_q"] in axes["seq_k"]:
            pick["seq_k"] = pick["seq_q"]
        if "seq_q" not in fixed and attempt % 2 == 0 and pick["seq_k"] in axes["seq_q"]:
            pick["seq_q"] = pick["seq_k"]
        group = int(pick["group"])  # type: ignore[call-overload]
        heads = [h for h in axes["num_heads"] if int(h) % group == 0]  # type: ignore[call-overload]
        if "num_heads" not in fixed and heads:
            pick["num_heads"] = rng.choice(heads)
        case = _case(
            pick["head_dim"],
            pick["seq_q"],
            pick["seq_k"],
            pick["batch"],
            pick["num_heads"],
            group,
            bool(pick["causal"]),
            extra or {},
        )
        if case and _cheap(case) and fits(case):
            return case
    return None


def _case(
    hd: object,
    sq: object,
    sk: object,
    batch: object,
    heads: object,
    group: int,
    causal: bool,
    extra: dict[str, object] | None = None,
) -> Case | None:
    h = int(heads)  # type: ignore[call-overload]
    if h % group:
        return None
    kw: dict[str, object] = {"causal": causal, **(extra or {})}
    try:
        return Case(
            int(hd),  # type: ignore[call-overload]
            int(sq),  # type: ignore[call-overload]
            int(sk),  # type: ignore[call-overload]
            num_heads=h,
            num_kv_heads=h // group,
            batch=int(batch),  # type: ignore[call-overload]
            **kw,  # type: ignore[arg-type]
        )
    except ValueError:
        return None


def _cheap(case: Case) -> bool:
    work = case.batch * case.num_heads * case.seq_q * case.seq_k * case.head_dim
    return work <= WORK_BUDGET
