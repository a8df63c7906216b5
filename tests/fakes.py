"""Test helpers shared by several test modules: a device that does no GPU work, a way to
run an event loop from a test that Playwright's loop may already occupy, a folder of
shaders with a planted bug in it, and what a command-line tool said refusing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from py_harness.gpu.device import Device
from py_harness.host.judge.mutants import MUTANTS
from py_harness.host.paths import shader_sources


def refusal_text(code: object, err: str) -> str:
    """What a tool said when it refused (SystemExit's code, and the stderr captured): an
    argparse usage error (exit 2) on stderr, else SystemExit's own message."""
    return err if code == 2 else str(code)


def own_thread(fn, *args):  # noqa: ANN001, ANN201
    """fn(*args) on a thread of its own: after a browser test Playwright's event loop runs
    on this one, and asyncio.run refuses to start inside it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def planted_shaders(parent: Path, name: str) -> Path:
    """A copy of the shaders with the planted bug `name` (mutants.py) in it, for --shaders:
    the folder parent / name."""
    [bug] = [m for m in MUTANTS if m.name == name]
    folder = parent / name
    folder.mkdir()
    for file, text in bug.apply(shader_sources()).items():
        (folder / file).write_text(text)
    return folder


class NoGPUWorkDevice(Device):
    """A device whose every method fails the test: bad input must never reach it."""

    def __init__(self) -> None:
        limits = {"maxStorageBufferBindingSize": 1 << 30, "maxBufferSize": 1 << 30}
        super().__init__("fake", {}, limits, frozenset())

    def _gpu_work(self, *args: object) -> None:
        raise AssertionError("GPU work was done for bad input")

    create_buffer = write_buffer = destroy_buffer = create_bind_group = destroy = _gpu_work
    _clear_buffers = _gpu_work
    _timestamp_queries = _encoder = _encode_pass = _resolve_queries = _gpu_work

    _encode_copy = _gpu_work

    async def _map_read(self, staging, spans, total):  # noqa: ANN001
        self._gpu_work()

    async def _create_pipeline(self, module, entry_point, layout, constants):  # noqa: ANN001
        self._gpu_work()

    async def _submit(self, encoder):  # noqa: ANN001
        self._gpu_work()

    async def _wait(self):  # noqa: ANN202
        self._gpu_work()


def write_variant(folder: Path, toml: str, wgsl: str, wgsl_name: str = "k.wgsl") -> Path:
    """A variant file and its one WGSL file in folder; returns the TOML's path."""
    (folder / wgsl_name).write_text(wgsl)
    path = folder / "variant.toml"
    path.write_text(toml)
    return path


def refused_variant(folder: Path, toml: str, wgsl: str, *words: str) -> str:
    """variant_file.load of that file fails; the message starts with the TOML's path and
    holds each of `words`. Returns it."""
    from py_harness.host.variant_file import VariantFileError, load

    path = write_variant(folder, toml, wgsl)
    try:
        load(path)
    except VariantFileError as err:
        text = str(err)
    else:
        raise AssertionError(f"{path} loaded; expected a refusal naming {words}")
    assert text.startswith(str(path)), text
    for w in words:
        assert w in text, f"{w!r} not in: {text}"
    return text
