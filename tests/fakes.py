"""Test helpers shared by several test modules: a device that does no GPU work, and a way
to run an event loop from a test that Playwright's loop may already occupy."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from py_harness.gpu.device import Device


def own_thread(fn, *args):  # noqa: ANN001, ANN201
    """fn(*args) on a thread of its own: after a browser test Playwright's event loop runs
    on this one, and asyncio.run refuses to start inside it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


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
