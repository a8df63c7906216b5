"""The example projects of kernels written to their own conventions (examples/bhsd-attention,
examples/fused-qkv-forward), run as their teams would run them: pytest in the project's
folder, the plugin reading its variant files, on wgpu and chromium, the smoke subset of the
cases generated inside each envelope and the planted bug each must catch. And the two
commands that start such a project: new-kernel writes a variant file's skeleton from WGSL,
lint-kernel checks one without running it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.host.tools import lint_kernel, new_kernel

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# project -> its planted-bug tests per runtime (one per variant and bug)
PROJECTS = {"bhsd-attention": 4, "fused-qkv-forward": 1}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.needs_runtime("wgpu", "chromium")
@pytest.mark.parametrize("project", PROJECTS)
def test_an_example_project_passes_its_smoke_cases_and_catches_its_bug(project: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "smoke"]
    cmd += ["--runtime", "wgpu,chromium", "-W", "ignore::pytest.PytestUnraisableExceptionWarning"]
    proc = subprocess.run(cmd, cwd=EXAMPLES / project, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    passed = int(re.search(r"(\d+) passed", out)[1])
    catches = 2 * PROJECTS[project]  # on each of the two runtimes
    assert passed > catches and " failed" not in out, out[-2000:]
    assert "lie outside its envelope, not run" in out


def test_new_kernel_writes_a_skeleton_that_lint_kernel_reads_back(tmp_path: Path) -> None:
    wgsl = tmp_path / "attn.wgsl"
    wgsl.write_text((EXAMPLES / "bhsd-attention/kernels/bhsd_attention_d32.wgsl").read_text())
    assert new_kernel.main([str(wgsl)]) == 0
    text = (tmp_path / "attn.toml").read_text()
    # every pass, every binding by the role its name suggests, the struct's fields guessed
    for entry in ("attn_fwd", "attn_bwd_delta", "attn_bwd_dq", "attn_bwd_dkdv"):
        assert f'entry_point = "{entry}"' in text
    assert "bindings = { q = 0, k = 1, v = 2, o = 3, lse = 4, params = 10 }" in text
    assert 'B = "batch"' in text and 'N = "seq_q"' in text and "[scratch.Delta]" in text
    # its TODOs stop it until they are filled in: lint-kernel says where
    assert lint_kernel.main([str(tmp_path / "attn.toml")]) == 1
    filled = text.replace('size = "TODO"', 'size = "batch * num_heads * seq_q"')
    filled = filled.replace("# layouts =", "layouts =").replace('# lse = "log2"', 'lse = "log2"')
    filled = filled.replace("# head_dim = [64]", "head_dim = [32]").replace(
        '# require = ["seq_q == seq_k"]', 'require = ["seq_q == seq_k"]'
    )
    filled = filled.replace(
        '["ceil(seq_q / 32)", "num_heads", "batch"]', '["batch * num_heads * seq_q", 1, 1]'
    )
    (tmp_path / "attn.toml").write_text(filled)
    assert lint_kernel.main([str(tmp_path / "attn.toml")]) == 0


def test_new_kernel_will_not_overwrite_and_lint_kernel_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wgsl = tmp_path / "k.wgsl"
    wgsl.write_text("@compute @workgroup_size(1) fn main() {}\n")
    (tmp_path / "k.toml").write_text("")
    with pytest.raises(SystemExit):
        new_kernel.main([str(wgsl)])
    assert "exists (--force to overwrite it)" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\nsupports = ["causal"]\nfiles = ["k.wgsl"]\n[forward]\nentry_point = "nope"\n'
    )
    assert lint_kernel.main([str(bad)]) == 1
    assert "bad.toml:" in capsys.readouterr().err


BHSD = EXAMPLES / "bhsd-attention/kernels/bhsd_attention.toml"
# Declarations that do not describe the bhsd kernels: each must turn the judge red, or the
# harness is not reading what it is told.
WRONG = {
    "layouts left out": ("layouts = {", "nolayouts = {"),
    "the LSE's units": ('lse = "log2"', 'lse = "ln"'),
    "a struct field": ('N = "seq_q"', 'N = "seq_q + 1"'),
    "the grid": (
        'grid = ["ceil(seq_q / 64)", "num_heads", "batch"]',
        'grid = ["ceil(seq_q / 128)", "num_heads", "batch"]',
    ),
}


@pytest.mark.browser
@pytest.mark.needs_runtime("wgpu")
def test_a_declaration_that_misdescribes_the_kernels_fails_the_judge(tmp_path: Path) -> None:
    from py_harness.host import variants
    from py_harness.host.engine import evaluate, open_session
    from py_harness.host.judge.cases import CONTROL

    before = variants.snapshot()
    try:
        text = BHSD.read_text().replace('"bhsd_attention_d', f'"{BHSD.parent}/bhsd_attention_d')
        names = {}
        for i, (what, (old, new)) in enumerate(WRONG.items()):
            assert old in text, what
            path = tmp_path / f"wrong{i}.toml"
            edited = text.replace(old, new, 1).replace('name = "bhsd"', f'name = "wrong{i}"')
            path.write_text(edited.replace("nolayouts = {", "# layouts = {"))
            names[what] = variants.load_file(path)
        # Q's layout as strides instead of its order: the same placement, the same verdict
        strides = (
            '{ strides = { B = "num_heads * seq_q * head_dim", H = "seq_q * head_dim", '
            'S = "head_dim", D = 1 } }'
        )
        as_strides = tmp_path / "strides.toml"
        as_strides.write_text(
            text.replace('q = "BHSD"', f"q = {strides}", 1).replace(
                'name = "bhsd"', 'name = "strides"'
            )
        )
        with open_session("wgpu") as session:
            right = variants.load_file(BHSD)
            assert evaluate(CONTROL, session, variant=right).passed
            assert evaluate(CONTROL, session, variant=variants.load_file(as_strides)).passed
            for what, name in names.items():
                result = evaluate(CONTROL, session, variant=name)
                assert not result.passed, f"{what}: {[str(r) for r in result.reports]}"
    finally:
        variants.restore(before)


BHSD_F16 = EXAMPLES / "bhsd-attention/kernels/bhsd_f16.toml"


@pytest.mark.browser
@pytest.mark.needs_runtime("wgpu")
def test_f16_kernels_declared_less_accurate_than_they_are_still_pass(tmp_path: Path) -> None:
    """The f16 rule holds a kernel to what it declares: bhsd_f16 computes in float32, and
    declared as f16 products in f16 sums of 8 with f16 P and dS it passes all the same (a
    looser baseline). Its smoke cases, on wgpu-py (lavapipe offers shader-f16)."""
    from py_harness.host import variants
    from py_harness.host.engine import evaluate, open_session
    from py_harness.host.judge.generated import matrix

    before = variants.snapshot()
    try:
        text = BHSD_F16.read_text().replace(
            '"bhsd_attention_f16_d', f'"{BHSD_F16.parent}/bhsd_attention_f16_d'
        )
        loose = (
            'arithmetic = { products = "f16", accumulate = "f16", chunk = 8, '
            'intermediates = "f16" }'
        )
        old = 'arithmetic = { products = "f32", accumulate = "f32", intermediates = "f32" }'
        assert old in text
        path = tmp_path / "loose.toml"
        path.write_text(text.replace(old, loose).replace('name = "bhsd_f16"', 'name = "loose"'))
        name = variants.load_file(path)
        with open_session("wgpu") as session:
            for case in [c for c in matrix(variants.get(name)) if c.smoke][:6]:
                result = evaluate(case, session, variant=name)
                assert result.passed, [str(r) for r in result.reports]
                assert {r.baseline for r in result.reports} <= {
                    "seq(f16 products, f16 sums of 8, f16 P and dS)",
                    "blas32",
                }
    finally:
        variants.restore(before)
