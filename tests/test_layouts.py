"""Tensor layouts (py_harness/layouts.py): every declared order or stride table puts each
element where NumPy's own strided view of the same buffer says, and brings it back; packed
roles hold their parts in the declared order; bad declarations are refused naming the role."""

from __future__ import annotations

import itertools
from array import array

import numpy as np
import pytest

from py_harness import layouts
from py_harness.config import AttentionConfig, ConfigError
from py_harness.layouts import CANONICAL, Layout, axis_sizes, from_kernel, to_kernel
from py_harness.params import SCOPE_NAMES, expression_scope

CFG = AttentionConfig(batch=2, num_heads=6, seq_q=5, seq_k=7, head_dim=3, num_kv_heads=2)


def tensor(cfg: AttentionConfig, role: str, seed: int = 0) -> np.ndarray:
    shape = tuple(n for a, n in axis_sizes(cfg, role).items() if a.isalpha())
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def placed(cfg: AttentionConfig, role: str, spec: object):  # noqa: ANN201
    layout = Layout.parse(role, spec, SCOPE_NAMES, f"layouts.{role}")
    return layout.placement(cfg, expression_scope(cfg))


@pytest.mark.parametrize("order", ["".join(p) for p in itertools.permutations("BSHD")])
@pytest.mark.parametrize("role", ["q", "k", "dq", "dv"])
def test_every_axis_order_is_numpys_transpose(order: str, role: str) -> None:
    x = tensor(CFG, role)
    got = np.frombuffer(to_kernel(CFG, role, {role: x.tobytes()}, placed(CFG, role, order)), "<f4")
    want = x.transpose(["BSHD".index(a) for a in order])
    assert np.array_equal(got, want.reshape(-1))
    back = from_kernel(CFG, role, got.tobytes(), placed(CFG, role, order))[role]
    assert back == x.tobytes()


@pytest.mark.parametrize("order", ["BHS", "BSH", "HBS", "SHB"])
def test_lse_orders(order: str) -> None:
    x = tensor(CFG, "lse")
    got = np.frombuffer(
        to_kernel(CFG, "lse", {"lse": x.tobytes()}, placed(CFG, "lse", order)), "<f4"
    )
    assert np.array_equal(got, x.transpose(["BHS".index(a) for a in order]).reshape(-1))


@pytest.mark.parametrize("order", ["BS3HD", "B3HSD", "3BSHD", "BSH3D"])
def test_packed_qkv_holds_its_parts_in_the_declared_order(order: str) -> None:
    cfg = AttentionConfig(batch=2, num_heads=3, seq_q=4, seq_k=4, head_dim=5)
    parts = {n: tensor(cfg, "q", seed) for seed, n in enumerate(("q", "k", "v"))}
    raw = to_kernel(
        cfg, "qkv", {n: a.tobytes() for n, a in parts.items()}, placed(cfg, "qkv", order)
    )
    stacked = np.stack([parts[n] for n in ("q", "k", "v")])  # [3, B, S, H, D]
    want = stacked.transpose(["3BSHD".index(a) for a in order])
    assert np.array_equal(np.frombuffer(raw, "<f4"), want.reshape(-1))
    split = from_kernel(cfg, "dqkv", raw, placed(cfg, "dqkv", order))
    assert split == {("d" + n): parts[n].tobytes() for n in ("q", "k", "v")}


def test_the_canonical_packed_layouts_are_the_harness_ones() -> None:
    # [B, Sk, Hkv, 2, D]: per key row and KV head, K's D floats, then V's
    k, v = tensor(CFG, "k", 1), tensor(CFG, "v", 2)
    kv = np.frombuffer(to_kernel(CFG, "kv", {"k": k.tobytes(), "v": v.tobytes()}), "<f4")
    assert np.array_equal(kv, np.stack([k, v], axis=3).reshape(-1))
    assert CANONICAL["kv"] == "BSH2D" and CANONICAL["qkv"] == "BS3HD"


def test_strides_with_padded_rows_and_an_offset() -> None:
    """A tensor inside a larger buffer: rows of D padded to 8 floats, 16 floats in."""
    spec = {
        "strides": {"B": "seq_q * num_heads * 8", "S": "num_heads * 8", "H": 8, "D": 1},
        "offset": 16,
        "size": "16 + batch * seq_q * num_heads * 8",
    }
    where = placed(CFG, "q", spec)
    x = tensor(CFG, "q")
    raw = np.frombuffer(to_kernel(CFG, "q", {"q": x.tobytes()}, where), "<f4")
    assert raw.size == where.floats == 16 + 2 * 5 * 6 * 8
    view = raw[16:].reshape(2, 5, 6, 8)
    assert np.array_equal(view[..., :3], x) and not view[..., 3:].any()
    assert from_kernel(CFG, "q", raw.tobytes(), where)["q"] == x.tobytes()


@pytest.mark.parametrize(
    ("role", "spec", "argument", "words"),
    [
        ("q", "BHS", "layouts.q", "not an order of q's axes BSHD"),
        ("q", "BHSDD", "layouts.q", "not an order"),
        ("lse", "BHSD", "layouts.lse", "BHS"),
        ("stats", "BHS", "layouts.stats", "stats has no layout"),
        ("q", {"strides": {"B": 1}}, "layouts.q.strides", "a stride for each of q's axes"),
        (
            "q",
            {"strides": {"B": 1, "S": 1, "H": 1, "D": "dd"}},
            "layouts.q.strides.D",
            "unknown name 'dd'",
        ),
        ("q", 7, "layouts.q", "must be an axis order"),
    ],
)
def test_a_bad_layout_is_refused_naming_the_role(
    role: str, spec: object, argument: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        Layout.parse(role, spec, SCOPE_NAMES, f"layouts.{role}")
    assert err.value.argument == argument and words in str(err.value), str(err.value)


def test_a_stride_table_that_overflows_its_size_or_overlaps_is_refused_per_case() -> None:
    small = {"strides": {"B": 90, "S": 18, "H": 3, "D": 1}, "size": 100}
    with pytest.raises(ConfigError, match="past the size of 100 floats"):
        placed(CFG, "q", small)
    flat = {"strides": {"B": 90, "S": 18, "H": 3, "D": 0}}
    with pytest.raises(ConfigError, match="stride 0 puts all 3 elements of axis D"):
        placed(CFG, "q", flat)


def test_relayout_moves_only_the_elements_it_names() -> None:
    src = array("f", range(12))
    dst = array("f", [-1.0] * 20)
    layouts.relayout(src, 0, {"a": 4, "b": 1}, dst, 2, {"a": 1, "b": 5}, {"a": 3, "b": 4})
    got = np.array(dst)
    for a, b in itertools.product(range(3), range(4)):
        assert got[2 + a + 5 * b] == 4 * a + b
    assert (got[:2] == -1).all()
