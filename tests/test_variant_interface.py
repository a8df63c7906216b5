"""Variant files for kernels written to their own conventions (host/variant_file.py): layouts,
grids, uniform structs and scratch by expression, forward-only and backward-only variants,
one module per head_dim, envelopes. A file that disagrees with its WGSL, or that some case
of its envelope could not run, is refused before any GPU work with file:line and what to
change; the dict form carries all of it to a runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from py_harness.config import AttentionConfig, ConfigError
from py_harness.host.variant_file import VariantFileError, load
from py_harness.kernels import Variant
from py_harness.params import expression_scope, pack_struct
from py_harness.run_plan import RunPlan, Split, from_units, to_units
from tests.fakes import refused_variant, write_variant

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*/kernels/*.toml"))

WGSL = """\
struct Dims { B: u32, H: u32, N: u32, D: u32, sm_scale: f32, causal: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
@group(0) @binding(4) var<storage, read_write> L: array<f32>;
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read_write> Delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> dQ: array<f32>;
@group(0) @binding(8) var<storage, read_write> dK: array<f32>;
@group(0) @binding(9) var<storage, read_write> dV: array<f32>;
@group(0) @binding(10) var<uniform> dims: Dims;

@compute @workgroup_size(64)
fn fwd(@builtin(global_invocation_id) id: vec3<u32>) {
    O[id.x] = Q[id.x] * K[id.x] * V[id.x] * dims.sm_scale;
    L[id.x] = f32(dims.N);
}

@compute @workgroup_size(32)
fn delta(@builtin(workgroup_id) wg: vec3<u32>) {
    Delta[wg.x] = O[wg.x] * dO[wg.x];
}

@compute @workgroup_size(64)
fn grads(@builtin(global_invocation_id) id: vec3<u32>) {
    dQ[id.x] = Q[id.x] + L[id.x] + Delta[id.x] + f32(dims.B);
    dK[id.x] = Q[id.x] + dO[id.x];
    dV[id.x] = dO[id.x];
}
"""
TOML = """\
name = "own"
files = ["k.wgsl"]
supports = ["causal"]
layouts = { q = "BHSD", k = "BHSD", v = "BHSD", o = "BHSD", dq = "BHSD", lse = "BHS" }
lse = "log2"

[params]
B = "batch"
H = "num_heads"
N = "seq_q"
D = "head_dim"
sm_scale = "scale"

[scratch.Delta]
size = "batch * num_heads * seq_q"

[envelope]
head_dim = [32, 64]
seq_q = { max = 512 }
require = ["seq_q == seq_k"]

[forward]
entry_point = "fwd"
bindings = { q = 0, k = 1, v = 2, o = 3, lse = 4, params = 10 }
grid = ["ceil(seq_q / 64)", "num_heads", "batch"]

[[backward]]
entry_point = "delta"
bindings = { o = 3, d_out = 5, Delta = 6, params = 10 }
grid = ["batch * num_heads * seq_q", 1, 1]

[[backward]]
entry_point = "grads"
bindings = { q = 0, lse = 4, d_out = 5, Delta = 6, dq = 7, dk = 8, dv = 9, params = 10 }
grid = ["ceil(seq_q / 64)", "num_heads", "batch"]
"""


def write(tmp_path: Path, toml: str = TOML, wgsl: str = WGSL, name: str = "k.wgsl") -> Path:
    return write_variant(tmp_path, toml, wgsl, name)


def refused(tmp_path: Path, *words: str, toml: str = TOML, wgsl: str = WGSL) -> str:
    return refused_variant(tmp_path, toml, wgsl, *words)


def test_a_kernel_of_its_own_conventions_loads_and_travels(tmp_path: Path) -> None:
    v = load(write(tmp_path)).variant
    assert v.lse == "log2" and set(v.scratch) == {"Delta"} and v.outputs[0] == "o"
    assert v.storage_roles[-1] == "Delta"
    ((n, fields),) = v.forward.uniforms.items()
    assert n == 10 and [f.name for f in fields] == [
        "B",
        "H",
        "N",
        "D",
        "sm_scale",
        "causal",
        "pad0",
        "pad1",
    ]
    assert v.backward[0].grid == ("batch * num_heads * seq_q", "1", "1")
    assert Variant.from_dict(json.loads(json.dumps(v.to_dict()))) == v


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_examples_load_and_travel(path: Path) -> None:
    v = load(path).variant
    assert Variant.from_dict(json.loads(json.dumps(v.to_dict()))) == v


def test_the_struct_and_the_grid_for_one_case(tmp_path: Path) -> None:
    v = load(write(tmp_path)).variant
    cfg = AttentionConfig(batch=2, num_heads=3, seq_q=100, seq_k=100, head_dim=32, causal=True)
    plan = RunPlan.of(v, cfg, Split())
    assert plan.grids[("delta", ("k.wgsl",))] == (600, 1, 1)
    assert plan.grids[("fwd", ("k.wgsl",))] == (2, 3, 2)
    raw = plan.uniforms["params/fwd/k.wgsl/10"]
    assert raw[:16] == bytes([2, 0, 0, 0, 3, 0, 0, 0, 100, 0, 0, 0, 32, 0, 0, 0])
    assert raw[20:24] == (1).to_bytes(4, "little") and len(raw) == 32  # causal; pads
    assert plan.floats["Delta"] == 600


def test_uniform_vectors_take_wgsl_alignment() -> None:
    from py_harness.expr import compile_expr
    from py_harness.params import SCOPE_NAMES, Field

    cfg = AttentionConfig(batch=1, num_heads=2, seq_q=3, seq_k=3, head_dim=4)
    e = lambda t: compile_expr(t, SCOPE_NAMES, "f")  # noqa: E731
    fields = (Field("a", "u32", (e("seq_q"),)), Field("b", "vec4f", tuple(e(x) for x in "1234")))
    raw = pack_struct(fields, cfg, expression_scope(cfg))
    assert len(raw) == 32 and raw[:4] == (3).to_bytes(4, "little") and raw[4:16] == bytes(12)


def test_an_lse_in_base_2_is_converted_both_ways_and_empty_rows_stay_empty() -> None:
    from array import array

    lse = array("f", [0.0, 1.0, -3.5, 3e38]).tobytes()
    back = array("f")
    back.frombytes(from_units(to_units(lse, "log2"), "log2"))
    assert list(back)[:3] == pytest.approx([0.0, 1.0, -3.5], abs=1e-6) and back[3] >= 1e38


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            '"ceil(seq_q / 64)", "num_heads", "batch"]\n\n[[',
            '"ceil(seqq / 64)", "num_heads", "batch"]\n\n[[',
            ["variant.toml:25:", "unknown name 'seqq'"],
        ),
        ('sm_scale = "scale"\n', "", ["field sm_scale has no value", "struct Dims at k.wgsl:1"]),
        (
            'D = "head_dim"',
            'D = "head_dim"\nE = "1"',
            ["params.E: no uniform struct bound as params has a field E", "struct Dims: B, H"],
        ),
        (
            'B = "batch"',
            'B = "batch / 2"',
            ["(inside the envelope) cannot run", "params.B", "whole number"],
        ),
        (
            'size = "batch * num_heads * seq_q"',
            'size = "batch * num_heads * seq_q * seq_q * 4096"',
            ["scratch.Delta", "over the device limit", "narrow the envelope"],
        ),
        (
            "seq_q = { max = 512 }",
            "seq_q = { max = 8192 }",
            [
                "the largest case d64-sq8192-sk8192-b3-h8",
                "x (batch * num_heads * seq_q)",
                "maxComputeWorkgroupsPerDimension of 65535",
            ],
        ),
        (
            'require = ["seq_q == seq_k"]',
            'require = ["seq_q == seq_k + 1000"]',
            ["no case of the harness's lies inside it"],
        ),
        (
            "Delta = 6, params = 10 }\ngrid",
            "Deltaa = 6, params = 10 }\ngrid",
            ["unknown role 'Deltaa'", "scratch buffers ([scratch.NAME]: Delta)"],
        ),
        (
            'layouts = { q = "BHSD"',
            'layouts = { q = "BHDD"',
            ["variant.toml:4:", "'BHDD' is not an order of q's axes"],
        ),
        (
            'lse = "log2"',
            'lse = "log2"\nlse_from = ["m", "l"]',
            ["lse_from", "names two scratch buffers"],
        ),
        ('lse = "log2"', 'lse = "log10"', ["lse: one of ln, log2, none"]),
        (
            "head_dim = [32, 64]",
            'head_dim = [32, 64]\ndtype = "f16"',
            ["envelope.dtype", "top-level dtypes"],
        ),
        (
            'files = ["k.wgsl"]',
            'files = ["k{head_dim}.wgsl"]\n',
            ["k32.wgsl: No such file"],
        ),
    ],
)
def test_a_declaration_that_cannot_run_is_refused_with_where(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    assert old in TOML, old
    refused(tmp_path, *words, toml=TOML.replace(old, new, 1))


def test_one_module_per_head_dim(tmp_path: Path) -> None:
    for hd in (32, 64):
        write(
            tmp_path,
            wgsl=WGSL.replace("@workgroup_size(32)", f"@workgroup_size({hd // 2})"),
            name=f"k{hd}.wgsl",
        )
    path = tmp_path / "variant.toml"
    path.write_text(TOML.replace('files = ["k.wgsl"]', 'files = ["k{head_dim}.wgsl"]'))
    v = load(path).variant
    assert [b for b, _ in v.by_head_dim] == [32, 64] and v.max_head_dim == 64
    assert v.for_head_dim(32).forward.files == ("k32.wgsl",)
    assert v.for_head_dim(64).backward[0].files == ("k64.wgsl",)
    no_list = path.read_text().replace("head_dim = [32, 64]", "head_dim = { max = 64 }")
    path.write_text(no_list)
    with pytest.raises(VariantFileError, match="envelope.head_dim = \\[..\\] \\(a list\\)"):
        load(path)


def test_forward_only_and_backward_only(tmp_path: Path) -> None:
    fwd_only = (
        TOML[: TOML.index("[[backward]]")]
        .replace(', dq = "BHSD"', "")
        .replace('[scratch.Delta]\nsize = "batch * num_heads * seq_q"\n', "")
    )
    v = load(write(tmp_path, fwd_only)).variant
    assert v.backward == () and v.outputs == ("o", "lse")
    bwd_only = TOML.replace(TOML[TOML.index("[forward]") : TOML.index("[[backward]]")], "")
    bwd_only = bwd_only.replace(', k = "BHSD", v = "BHSD"', "")
    v = load(write(tmp_path, bwd_only)).variant
    assert v.forward is None and v.outputs == ("dq", "dk", "dv")
    none = (
        fwd_only.replace('lse = "log2"', 'lse = "none"')
        .replace(", lse = 4", "")
        .replace(', lse = "BHS"', "")
    )
    wgsl = WGSL.replace("    L[id.x] = f32(dims.N);\n", "")
    assert load(write(tmp_path, none, wgsl)).variant.outputs == ("o",)
    with pytest.raises(VariantFileError, match="must bind lse read-write"):
        load(write(tmp_path, fwd_only.replace(", lse = 4", "").replace(', lse = "BHS"', ""), wgsl))


def test_a_declared_loop_count_is_checked_like_any_expression(tmp_path: Path) -> None:
    toml = TOML.replace(
        'grid = ["batch * num_heads * seq_q", 1, 1]',
        'grid = ["batch * num_heads * seq_q", 1, 1]\nloop_passes = "seq_q * head_dim"',
    )
    v = load(write(tmp_path, toml)).variant
    cfg = AttentionConfig(batch=1, num_heads=1, seq_q=100, seq_k=100, head_dim=32)
    assert v.backward[0].passes_needed(expression_scope(cfg)) == 3200
    with pytest.raises(VariantFileError, match="unknown name 'seq'"):
        load(write(tmp_path, toml.replace('"seq_q * head_dim"', '"seq * head_dim"')))


def test_a_bad_dict_form_is_refused_by_field() -> None:
    d = load(EXAMPLES[0]).variant.to_dict()
    d["scratch"]["Delta"]["size"] = "batch *"
    with pytest.raises(ConfigError) as err:
        Variant.from_dict(d)
    assert err.value.argument == "variant.scratch.Delta.size"


def test_an_lse_derived_from_a_row_maximum_and_sum(tmp_path: Path) -> None:
    """lse_from: the forward writes m and l; the judged LSE is m + log(l) (base 2 here),
    an empty row's l of 0 the harness's empty-row value; a backward-only run gets m = LSE
    and l = 1, so that its exp(s - m) / l is P."""
    from array import array

    toml = TOML.replace('lse = "log2"', 'lse = "log2"\nlse_from = ["m", "l"]')
    toml = toml.replace(", lse = 4, params = 10 }\ngrid", ", m = 4, l = 6, params = 10 }\ngrid", 1)
    rows = 'size = "batch * num_heads * seq_q"\n'
    toml = toml.replace("[scratch.Delta]", f"[scratch.m]\n{rows}[scratch.l]\n{rows}[scratch.Delta]")
    toml = toml.replace("lse = 4, d_out = 5, Delta = 6", "m = 4, d_out = 5, Delta = 6")
    wgsl = WGSL.replace("L[id.x] = f32(dims.N);", "L[id.x] = f32(dims.N);\n    Delta[id.x] = 1.0;")
    v = load(write(tmp_path, toml, wgsl)).variant
    assert v.lse_from == ("m", "l") and v.outputs[:2] == ("o", "lse")
    cfg = AttentionConfig(batch=1, num_heads=2, seq_q=2, seq_k=2, head_dim=32)
    plan = RunPlan.of(v, cfg, Split())
    m = array("f", [1.0, 2.0, 0.0, -1.0]).tobytes()
    s = array("f", [1.0, 4.0, 0.0, 0.5]).tobytes()
    lse = array("f")
    lse.frombytes(plan.derived_lse(m, s))
    ln2 = 0.6931471805599453
    assert list(lse)[:2] == pytest.approx([1.0 * ln2, 4.0 * ln2], rel=1e-6)
    assert lse[2] >= 1e38 and lse[3] == pytest.approx(-2.0 * ln2, rel=1e-6)
    given = {"lse": array("f", [0.5, 1.0, 3e38, -2.0]).tobytes()}
    got_m, got_l = array("f"), array("f")
    got_m.frombytes(plan.input_bytes("m", given))
    got_l.frombytes(plan.input_bytes("l", given))
    assert list(got_l) == [1.0] * 4 and got_m[2] >= 1e38
    assert got_m[0] == pytest.approx(0.5 / ln2, rel=1e-6)


def test_override_constants_by_expression(tmp_path: Path) -> None:
    """overrides = { NAME = expr }: set per case as pipeline constants (floats, as WebGPU
    passes them); a pipeline compiled ahead of any case leaves them out."""
    wgsl = WGSL.replace(
        "@compute @workgroup_size(64)\nfn fwd",
        "override TILE: u32 = 64u;\n\n@compute @workgroup_size(64)\nfn fwd",
    )
    grid = 'grid = ["ceil(seq_q / 64)", "num_heads", "batch"]\n'
    toml = TOML.replace(grid, grid + 'overrides = { TILE = "min(64, seq_q)" }\n', 1)
    v = load(write(tmp_path, toml, wgsl)).variant
    cfg = AttentionConfig(batch=1, num_heads=1, seq_q=17, seq_k=17, head_dim=32)
    assert v.forward.constants(cfg) == {"TILE": 17.0}
    assert v.forward.constants(None) == {}
    with pytest.raises(VariantFileError, match="unknown name 'seqq'"):
        load(write(tmp_path, toml.replace("min(64, seq_q)", "min(64, seqq)"), wgsl))


def test_a_files_own_cases_join_its_matrix(tmp_path: Path) -> None:
    from py_harness.host import variants

    toml = TOML.replace('lse = "log2"', 'lse = "log2"\ncases = ["d64-sq300-sk300-b2-h2-causal"]')
    before = variants.snapshot()
    try:
        name = variants.load_file(write(tmp_path, toml))
        ids = [c.id for c in variants.matrix(name)]
        assert ids[-1] == "d64-sq300-sk300-b2-h2-causal" and len(ids) == len(set(ids))
    finally:
        variants.restore(before)
    refused(tmp_path, "variant.toml:6:", "cases:", "'x3'", toml=toml.replace("h2-causal", "x3"))
