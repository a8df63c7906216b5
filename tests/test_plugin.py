"""The pytest plugin as a project sees it (pytester: a fresh pytest run in a temporary
folder, the plugin loaded by its entry point): options, ini keys, markers, and the refusal
of bad options before any runtime starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import planted_shaders

pytest_plugins = ["pytester"]


def test_options_ini_keys_and_markers_are_registered(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    for option in ("--runtime", "--variant", "--variant-file", "--draws", "--long", "--case"):
        assert option in help_text
    for key in ("harness_runtimes", "harness_variants", "harness_variant_files"):
        assert key in help_text
    markers = pytester.runpytest("--markers").stdout.str()
    for marker in ("smoke", "long", "browser", "needs_adapter", "needs_runtime"):
        assert f"@pytest.mark.{marker}" in markers


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runtime", "safari"], "--runtime: unknown 'safari'"),
        (["--variant", "nope"], "--variant: unknown 'nope'"),
        (
            ["--variant", ","],
            "--variant: name at least one of seed, fast, fast_f16, fast_f16x2, or all",
        ),
        (["--draws", "0"], "--draws: must be >= 1"),
        (["--case", "d1-no-such-case"], "d1-no-such-case"),
        (["--variant-file", "missing.toml"], "missing.toml"),
        (["--shaders", "."], "lacks fa2_common.wgsl, fa2_fast_backward.wgsl"),
        (["--harness-json", "/proc/no/results.json"], "--harness-json: cannot write /proc/no"),
        (["--harness-json", "."], "--harness-json: cannot write .: a folder"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, message) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_ini_keys_set_the_defaults(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nharness_runtimes = wgpu\nharness_variants = fast\n")
    pytester.makepyfile(
        """
        def test_chosen(request, variant):
            assert request.config.harness_runtimes == ["wgpu"]
            assert variant == "fast"
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser
def test_needs_adapter_skips_what_the_adapter_lacks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.needs_adapter(feature="no-such-feature")
        def test_feature(harness):
            raise AssertionError("ran without the feature")

        @pytest.mark.needs_adapter(limits={"maxComputeWorkgroupStorageSize": 1 << 40})
        def test_limit(harness):
            raise AssertionError("ran without the limit")

        @pytest.mark.needs_adapter(limits={"maxComputeWorkgroupStorageSize": 16384})
        def test_has_it(harness):
            assert harness.adapter()["limits"]["maxComputeWorkgroupStorageSize"] >= 16384
        """
    )
    result = pytester.runpytest_subprocess("--runtime", "wgpu", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*lacks the feature 'no-such-feature'*"])


def test_needs_runtime_skips_where_a_runtime_is_missing_and_refuses_unknown_names(
    pytester: pytest.Pytester,
) -> None:
    """Firefox made missing (its path moved) in the test run's own process: the marked
    test is skipped with the runtime's own reason before its body runs; an unknown name,
    or none, is a usage error that names the test."""
    pytester.makepyfile(
        """
        import pytest
        from py_harness.host.runtimes import firefox

        firefox.FIREFOX_PATH = "/nonexistent/firefox-esr"

        @pytest.mark.needs_runtime("firefox")
        def test_marked():
            raise AssertionError("ran without firefox")

        def test_unmarked():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*firefox: *apt-get install firefox-esr*"])
    for args in ('"safari"', ""):
        pytester.makepyfile(
            f"import pytest\n@pytest.mark.needs_runtime({args})\ndef test_x(): pass\n"
        )
        result = pytester.runpytest_subprocess()
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "test_x: needs_runtime(" in result.stderr.str(), result.stderr.str()


MASK_CASE = "d64-sq113-sk203-h4-mask-full"  # fails fast-full-tile-ignores-mask on wgpu


def _one_failing_case(pytester: pytest.Pytester, shaders: object) -> str:
    """A project's matrix test run on MASK_CASE with the given kernels, which must fail it;
    its output."""
    pytester.makepyfile("def test_case(run_case, matrix_case):\n    run_case(matrix_case)\n")
    args = ["--runtime", "wgpu", "--variant", "fast", "--case", MASK_CASE, "--shaders", shaders]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    return result.stdout.str()


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser
def test_a_failing_case_reports_its_verdict_and_no_traceback(pytester: pytest.Pytester) -> None:
    """The verdict names the case, variant, runtime and each output's worst element; the
    plugin's own source (run_case's body) is not printed under it."""
    shaders = planted_shaders(pytester.path, "fast-full-tile-ignores-mask")
    out = _one_failing_case(pytester, shaders)
    assert f"{MASK_CASE} (fast) on wgpu:\no: FAIL max abs" in out, out
    assert "__tracebackhide__" not in out and "def run(" not in out and "assert " not in out


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser
def test_wgsl_that_does_not_compile_reports_the_compilers_words_only(
    pytester: pytest.Pytester,
) -> None:
    """A kernel author's compile error: file:line:column, the compiler's message and the
    source line, not the harness's stack above the compiler's call."""
    shaders = planted_shaders(pytester.path, "fast-full-tile-ignores-mask")
    forward = shaders / "fa2_fast_forward.wgsl"
    lines = forward.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("let "))
    lines[at] = lines[at].replace("let ", "let let ", 1)
    forward.write_text("\n".join(lines) + "\n")
    out = _one_failing_case(pytester, shaders)
    said = f"{MASK_CASE} (fast) on wgpu: the WGSL did not compile\nShaderCompileError: "
    assert said in out and f"fa2_fast_forward.wgsl:{at + 1}:" in out, out
    assert "Traceback" not in out and "runner.py" not in out, out


def test_a_compile_error_from_a_page_comes_back_as_itself() -> None:
    from py_harness import errors
    from py_harness.gpu.device import GPUError, ShaderCompileError
    from py_harness.host.engine import compile_error
    from py_harness.host.runtimes.sessions import PageError, page_error

    raised = errors.record(ShaderCompileError("f.wgsl:3:1: error: x\n  y"))
    assert raised is not None
    exc = page_error("run_case", raised, None, "chromium")
    assert type(exc) is ShaderCompileError
    assert compile_error(exc) == "ShaderCompileError: compilation error: f.wgsl:3:1: error: x\n  y"
    lost = page_error("run_case", errors.record(GPUError("device-lost", "gone")) or "", None, "x")
    assert type(lost) is GPUError and compile_error(lost) is None
    # a traceback (a harness bug, not a typed error) stays the page's words
    stack = 'Traceback (most recent call last):\n  File "runner.py", line 99\nKeyError: 1'
    assert type(page_error("run_case", stack, None, "chromium")) is PageError
    assert compile_error(ValueError("seq_q: must be >= 1")) is None


def test_a_shaders_folder_needs_the_files_of_the_judged_variants_only(
    pytester: pytest.Pytester,
) -> None:
    """A team editing the seed's files points --shaders at a folder of those three; it
    used to be refused for lacking the fast variant's."""
    from py_harness.host.paths import SHADER_DIR

    folder = pytester.path / "my_wgsl"
    folder.mkdir()
    for name in ("fa2_common.wgsl", "flash_attention_v2.wgsl", "flash_attention_v2_backward.wgsl"):
        (folder / name).write_text((SHADER_DIR / name).read_text())
    pytester.makepyfile("def test_nothing(variant):\n    assert variant == 'seed'\n")
    pytester.runpytest("--shaders", folder, "--variant", "seed").assert_outcomes(passed=1)
    refused = pytester.runpytest("--shaders", folder, "--variant", "seed,fast")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "lacks fa2_fast_backward.wgsl" in refused.stderr.str()
    assert "(the files of variant fast)" in refused.stderr.str()


def test_a_session_in_this_process_leaves_the_variants_as_it_found_them(
    pytester: pytest.Pytester,
) -> None:
    """Found by a fresh clone's CI (2026-12-06): a pytester run in a worker's own process
    left its --shaders folder (the seed's two files) to the tests after it, and the fast
    variant's then lacked their WGSL. What a session loads ends with it."""
    from py_harness.host import variants
    from py_harness.host.paths import SHADER_DIR

    folder = pytester.path / "my_wgsl"
    folder.mkdir()
    for name in ("fa2_common.wgsl", "flash_attention_v2.wgsl", "flash_attention_v2_backward.wgsl"):
        (folder / name).write_text((SHADER_DIR / name).read_text())
    before = (variants.names(), variants.sources("fast"))
    example = Path(__file__).parents[1] / "examples" / "packed-kv" / "kernels" / "packed_kv.toml"
    pytester.makepyfile("def test_nothing(variant):\n    pass\n")
    args = ["--shaders", folder, "--variant", "seed", "--variant-file", example]
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert (variants.names(), variants.sources("fast")) == before
