"""Variant files (host/variant_file.py): a valid file loads, and each way a TOML file and
its WGSL can disagree is refused with the TOML file, the WGSL file:line and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from py_harness.host.variant_file import load
from py_harness.host.wgsl_decls import function_source, scan
from py_harness.kernels import RO, RW, UNIFORM, VARIANTS, Variant
from py_harness.wgsl_source import strip_comments
from tests.fakes import refused_variant, write_variant

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/packed-kv/kernels/packed_kv.toml"
SHADER_DIR = ROOT / "shaders"

# A small but whole variant: a forward writing o and lse, a backward writing dq, dk and dv.
WGSL = """\
struct P {
    batch_size: u32,
    num_heads: u32,
    scale: f32,
    _pad0: u32,
};
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kv: array<f32>;
@group(0) @binding(2) var<storage, read_write> o: array<f32>;
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<uniform> params: P;
@group(0) @binding(5) var<storage, read_write> dq: array<f32>;
@group(0) @binding(6) var<storage, read_write> dkv: array<f32>;
/* a block comment /* nested */ that mentions dq and @binding(9) */
fn scaled(x: f32) -> f32 { return x * params.scale; }

@compute @workgroup_size(64)
fn fwd(@builtin(global_invocation_id) id: vec3<u32>) {
    o[id.x] = scaled(q[id.x] * kv[id.x]); // o = q k
    lse[id.x] = 0.0;
}

@compute
@workgroup_size(32, 2)
fn bwd(@builtin(global_invocation_id) id: vec3<u32>) {
    dq[id.x] = scaled(kv[id.x]);
    dkv[id.x] = q[id.x];
}
"""
TOML = """\
name = "tiny"
files = ["k.wgsl"]
params = ["batch_size", "num_heads", "scale", "_pad0"]
supports = ["causal"]

[forward]
entry_point = "fwd"
bindings = { q = 0, kv = 1, o = 2, lse = 3, params = 4 }
rows = "seq_q"
heads = "num_heads"

[[backward]]
entry_point = "bwd"
bindings = { q = 0, kv = 1, params = 4, dq = 5, dkv = 6 }
rows = "seq_k"
heads = "kv_heads"
"""


def write(tmp_path: Path, toml: str = TOML, wgsl: str = WGSL) -> Path:
    return write_variant(tmp_path, toml, wgsl)


def refused(tmp_path: Path, *words: str, toml: str = TOML, wgsl: str = WGSL) -> str:
    """load() of the edited fixture fails; the message names the TOML file and `words`."""
    return refused_variant(tmp_path, toml, wgsl, *words)


def test_a_valid_file_loads_with_kinds_from_the_wgsl(tmp_path: Path) -> None:
    loaded = load(write(tmp_path))
    v = loaded.variant
    assert v.name == "tiny" and v.supports == {"causal"}
    assert v.params == ("batch_size", "num_heads", "scale", "_pad0")
    assert v.forward.bindings == {
        0: ("q", RO),
        1: ("kv", RO),
        2: ("o", RW),
        3: ("lse", RW),
        4: ("params", UNIFORM),
    }
    (bwd,) = v.backward
    assert bwd.bindings[6] == ("dkv", RW) and bwd.rows == "seq_k" and bwd.heads == "kv_heads"
    # rows_per_workgroup defaults to the @workgroup_size's invocations
    assert (v.forward.rows_per_workgroup, bwd.rows_per_workgroup) == (64, 64)
    assert loaded.sources == {"k.wgsl": WGSL}
    assert v.forward.gemms == 0  # not counted unless the file says so
    counted = TOML.replace('heads = "num_heads"', 'heads = "num_heads"\ngemms = 2')
    assert load(write(tmp_path, counted)).variant.forward.gemms == 2
    assert bwd.dq_sums  # a pass binding the scratch touches all of it unless the file says not
    rows_only = TOML.replace('rows = "seq_k"', 'rows = "seq_k"\ndq_sums = false')
    assert not load(write(tmp_path, rows_only)).variant.backward[0].dq_sums
    # it travels as data
    request = json.loads(json.dumps(loaded.request()))
    assert Variant.from_dict(request["variant"]) == v and request["sources"] == loaded.sources


def test_the_packed_kv_example_loads() -> None:
    loaded = load(EXAMPLE)
    v = loaded.variant
    assert loaded.limitations_of == "seed"
    assert v.storage_roles == ("q", "d_out", "mask", "kv", "o", "lse", "dq", "dkv", "stats")
    dq, dkdv = v.backward
    assert dkdv.bindings[6] == ("dkv", RW) and dq.bindings[3] == ("o", RO)
    assert v.supports == frozenset(("causal", "causal_offset", "window", "mask", "dropout", "gqa"))


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            'entry_point = "bwd"',
            'entry_point = "bwd2"',
            ["[[backward]] #1", "'bwd2' is not defined"],
        ),
        (
            "dkv = 6 }",
            "dkv = 6, stats = 12 }",
            ["bindings.stats = 12", "no @group(0) @binding(12)"],
        ),
        (", dkv = 6 }", " }", ["k.wgsl:13", "dkv (@binding(6))", "gives no role"]),
        ("q = 0, kv = 1, o", "q = 0, kvv = 1, o", ["[forward]", "unknown role 'kvv'"]),
        ('"_pad0"]', '"window"]', ["struct P (k.wgsl:1)", "field 3 is _pad0 in the WGSL, window"]),
        ('"scale", "_pad0"]', '"_pad0", "scale"]', ["field 2 is scale in the WGSL, _pad0"]),
        ('"_pad0"]', '"_pad0", "sead"]', ["unknown field 'sead'", "batch_size"]),
        ('supports = ["causal"]', 'supports = ["causal", "rope"]', ["unknown ['rope']"]),
        (
            'supports = ["causal"]',
            'supports = ["causal", "alibi"]',
            ["no kernel binds alibi_slopes"],
        ),
        ('rows = "seq_k"', 'rows = "keys"', ["rows: must be one of seq_q, seq_k, slots"]),
        ('rows = "seq_k"', 'rows = "seq_k"\nkey_parts = 1', ["key_parts: must be true or false"]),
        ('rows = "seq_k"', 'rows = "seq_k"\ngemms = -1', ["gemms: must be an int >= 0"]),
        ('rows = "seq_k"', 'rows = "seq_k"\ndq_sums = 0', ["dq_sums: must be true or false"]),
        (
            'rows = "seq_k"',
            'rows = "seq_k"\nkey_parts = true',
            ["key_parts: dK and dV copies need dk and dv bound"],
        ),
        ('name = "tiny"', 'name = "tiny"\nentrypoint = "x"', ["unknown key 'entrypoint'"]),
        ('files = ["k.wgsl"]', 'files = ["gone.wgsl"]', ["gone.wgsl: No such file"]),
        ('supports = ["causal"]\n', "", ["`supports` is missing"]),
        ("lse = 3, ", "", ["k.wgsl:10", "lse (@binding(3))"]),
        ('name = "tiny"', 'name = "tiny', ["not valid TOML"]),
        ('name = "tiny"', 'name = "tiny/v2"', ["name: must be letters, digits"]),
        ('name = "tiny"', 'name = "tiny"\nlimitations_of = "sed"', ["'sed' is not a built-in"]),
    ],
)
def test_a_toml_that_disagrees_is_refused(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    assert old in TOML
    refused(tmp_path, *words, toml=TOML.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        # an output on a read-only binding; a gradient too
        (
            "var<storage, read_write> o:",
            "var<storage, read> o:",
            ["o at k.wgsl:9 is read-only", "read_write"],
        ),
        ("read_write> dkv:", "read> dkv:", ["dkv at k.wgsl:13 is read-only", "writes dkv"]),
        # params must be the uniform, and nothing else may be
        (
            "var<uniform> params: P",
            "var<storage, read> params: P",
            ["params cannot be bound as read-only-storage: it needs var<uniform>"],
        ),
        # the struct's types are the harness's (scale is f32)
        ("scale: f32", "scale: u32", ["declares scale: u32", "packs it as f32"]),
        ("@compute @workgroup_size(64)\nfn fwd", "fn fwd", ["fn fwd is not a @compute"]),
        (
            "@group(0) @binding(0) var<storage, read> q",
            "@group(1) @binding(0) var<storage, read> q",
            ["k.wgsl:7: q is in @group(1)", "group 0 only"],
        ),
        (
            "@workgroup_size(64)",
            "@workgroup_size(512)",
            ["maxComputeInvocationsPerWorkgroup >= 512"],
        ),
        # two declarations at one binding that the entry point does not use, differing in access
        (
            "/* a block",
            "@group(0) @binding(7) var<storage, read> x7: array<f32>;\n"
            "@group(0) @binding(7) var<storage, read_write> y7: array<f32>;\n/* a block",
            ["the entry point uses none of the declarations at binding 7"],
        ),
    ],
)
def test_wgsl_that_disagrees_is_refused(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    assert old in WGSL
    toml = TOML.replace("dkv = 6 }", "dkv = 6, stats = 7 }") if "x7" in new else TOML
    refused(tmp_path, *words, toml=toml, wgsl=WGSL.replace(old, new, 1))


def test_a_kernel_may_bind_an_input_read_write(tmp_path: Path) -> None:
    """An input declared read_write is accepted (the buffers are fresh for each run; a
    kernel that wrote its inputs would fail the judge)."""
    loaded = load(write(tmp_path, wgsl=WGSL.replace("read> q:", "read_write> q:")))
    assert loaded.variant.forward.bindings[0] == ("q", RW)


def test_more_storage_buffers_than_the_limit_need_declaring(tmp_path: Path) -> None:
    extra = dict(zip(range(7, 14), ("d_out", "mask", "stats", "k", "v", "dk", "dv"), strict=True))
    wgsl = WGSL + "".join(
        f"@group(0) @binding({n}) var<storage, read_write> m{n}: array<f32>;\n" for n in extra
    )
    uses = "".join(f"    dq[{n}] = m{n}[0];\n" for n in extra)
    wgsl = wgsl.replace("    dkv[id.x] = q[id.x];\n", "    dkv[id.x] = q[id.x];\n" + uses)
    roles = "".join(f", {role} = {n}" for n, role in extra.items())
    toml = TOML.replace("dkv = 6 }", f"dkv = 6{roles} }}")
    refused(
        tmp_path,
        "uses 11 storage buffers",
        "maxStorageBuffersPerShaderStage = 11",
        toml=toml,
        wgsl=wgsl,
    )
    # declared, the limit passes; the variant's own checks then refuse dkv beside dk and dv
    limit = "[required_limits]\nmaxStorageBuffersPerShaderStage = 11\n\n[forward]"
    toml = toml.replace("[forward]", limit)
    refused(tmp_path, "binds dkv and ['dk', 'dv']", toml=toml, wgsl=wgsl)


def test_the_scanner_finds_what_the_builtin_kernels_use() -> None:
    """kernels.py declares each built-in entry point's bindings by hand; the scanner's
    static-use analysis must find exactly those, with the same kinds (the fast variant's
    module declares binding 10 three times and shares helpers across entry points)."""
    sources = {p.name: p.read_text() for p in SHADER_DIR.glob("*.wgsl")}
    for top in VARIANTS.values():
        for v in (top, *(s for _, s in top.by_head_dim)):
            most = v.required_limits["maxComputeInvocationsPerWorkgroup"]
            for k in (v.forward, *v.backward):
                module = scan([(f, sources[f]) for f in k.files])
                used = {r.binding: r.kind for r in module.used_resources(k.entry_point)}
                assert used == {n: kind for n, (_, kind) in k.bindings.items()}, k.entry_point
                # within the limits the variant asks for (512 for head_dim 256's halves)
                size = module.workgroup_size(k.entry_point)
                assert size in ((128, 1, 1), (256, 1, 1), (most, 1, 1)), k.entry_point


def test_comments_are_blanked_with_lines_kept() -> None:
    src = "a // b\n/* c /* d */\n e */ f\n"
    out = strip_comments(src)
    assert out.split("\n")[0].strip() == "a" and out.count("\n") == 3
    assert out.split("\n")[2].strip() == "f"


def test_function_source_takes_each_function_whole_and_names_a_missing_one() -> None:
    src = "// f\nfn f(a: f32) -> f32 {\n    if (a > 0.0) { return a; } /* } */\n    return -a;\n}\n"
    src += "fn g() {}\n"
    body = "    if (a > 0.0) { return a; }        \n    return -a;\n}"  # the comment blanked
    assert function_source(src, "g", "f") == "fn g() {}\nfn f(a: f32) -> f32 {\n" + body
    with pytest.raises(KeyError, match="no fn h"):
        function_source(src, "g", "h")
