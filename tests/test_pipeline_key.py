"""A device compiles a pipeline once per code its entry point reaches
(ShaderModuleSource.entry_digest): modules that differ only in functions the entry point
never calls share one pipeline, and any other difference gives a new one."""

from __future__ import annotations

import asyncio

import pytest

from py_harness.host.paths import shader_sources
from py_harness.host.wgsl_decls import scan
from py_harness.kernels import variant
from py_harness.shaders import ShaderModuleSource, compose, functions_reached
from tests.fakes import NoGPUWorkDevice, own_thread

CODE = """
const SCALE = 2.0;
override WIDTH: u32 = 4u;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
fn helper(x: f32) -> f32 { return leaf(x) * SCALE; }
fn leaf(x: f32) -> f32 { return x + 1.0; }  // called through helper
fn unused(x: f32) -> f32 { if (x > 0.0) { return x; } return -x; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = helper(f32(id.x % WIDTH));
}
"""


def _key(code: str, entry: str = "main") -> str:
    return ShaderModuleSource("m", (("m.wgsl", code),)).entry_digest(entry)


@pytest.mark.parametrize(
    ("old", "new", "same"),
    [
        ("return -x;", "return x * 3.0;", True),  # a function main never calls
        ("// called through helper", "// a comment", True),
        ("return x + 1.0;", "return x + 2.0;", False),  # called through another function
        ("const SCALE = 2.0;", "const SCALE = 3.0;", False),
        ("WIDTH: u32 = 4u", "WIDTH: u32 = 8u", False),
        ("@workgroup_size(64)", "@workgroup_size(32)", False),
        ("array<f32>", "array<u32>", False),
    ],
    ids=["uncalled-fn", "comment", "transitive-callee", "const", "override", "attribute", "var"],
)
def test_entry_digest_ignores_only_what_the_entry_point_cannot_reach(
    old: str, new: str, same: bool
) -> None:
    assert old in CODE
    assert (_key(CODE) == _key(CODE.replace(old, new))) is same


def test_entry_digest_reads_nested_block_comments_and_falls_back_to_the_whole_code() -> None:
    # a function inside a (nested) block comment is no function, and the comment no code
    commented = CODE + "/* /* nested */ fn main() { } */"
    assert _key(commented) == _key(CODE)
    assert _key(CODE.replace("return -x;", "return -x; /* fn leaf() {} */")) == _key(CODE)
    # an entry point the code does not define (the driver reports it)
    module = ShaderModuleSource("m", (("m.wgsl", CODE),))
    assert module.entry_digest("nowhere") == module.digest


def test_a_local_named_as_a_function_keeps_that_function() -> None:
    code = CODE.replace("out[id.x] = helper(", "let unused = 1.0;\n    out[id.x] = helper(")
    assert _key(code) != _key(code.replace("return -x;", "return x * 3.0;"))


def test_functions_reached_agree_with_the_declaration_scanner_on_every_kernel() -> None:
    sources = shader_sources()
    checked = 0
    for name in ("seed", "fast"):
        for head_dim in (8, 64, 128, 256):
            for kernel in variant(name).for_head_dim(head_dim).kernels:
                module = compose(kernel.entry_point, tuple(kernel.files), sources)
                found = functions_reached(module.code, kernel.entry_point)
                assert found is not None, kernel.entry_point
                decls = scan(list(module.parts))
                want = (decls.used_names(kernel.entry_point) & decls.functions.keys()) | {
                    kernel.entry_point
                }
                assert found[2] == want, kernel.entry_point
                assert set(found[1]) == set(decls.functions), kernel.entry_point
                checked += 1
    assert checked >= 20


class CountingDevice(NoGPUWorkDevice):
    """Compiles nothing; counts what it was asked to compile."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled_codes: list[str] = []

    async def _create_pipeline(self, module, entry_point, layout, constants):  # noqa: ANN001
        self.compiled_codes.append(module.code)
        return object()


def test_a_device_compiles_once_per_reachable_code() -> None:
    dev = CountingDevice()
    edits = [
        CODE,
        CODE.replace("return -x;", "return x * 3.0;"),  # shares the first's pipeline
        CODE.replace("return x + 1.0;", "return x + 2.0;"),
    ]

    async def pipelines() -> list[object]:
        return [
            await dev.compute_pipeline(
                ShaderModuleSource("m", (("m.wgsl", code),)), "main", ((0, "storage"),)
            )
            for code in edits
        ]

    first, second, third = own_thread(asyncio.run, pipelines())
    assert first is second and third is not first
    assert dev.compiled_codes == [edits[0], edits[2]]  # each compiled as written
