"""The host side of a case on the native backends: buffers reused from one case to the next
(Device.acquire_buffers / release_buffers), and the threaded copies and finite check
(host/gpu/host_memory.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from py_harness import config, runner
from py_harness.config import AttentionConfig
from py_harness.gpu.device import KEPT_READBACKS, Buffer
from py_harness.host import variants
from py_harness.host.gpu import host_memory
from py_harness.host.judge.cases import Case
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.paths import shader_sources
from py_harness.host.runtimes.sessions import PageError
from py_harness.host.wire import decode_outputs, encode_tensors, run_on, tensor_blobs
from py_harness.kernels import variant
from py_harness.service import HarnessService
from tests.fakes import NoGPUWorkDevice, own_thread
from tests.native_child import NATIVE, child_report

ROOT = Path(__file__).resolve().parents[1]

STORAGE = ("STORAGE", "COPY_DST")


class Ledger(NoGPUWorkDevice):
    """Makes buffers (bytearrays) and records what is made, cleared and destroyed."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[str] = []
        self.cleared: list[str] = []
        self.destroyed: list[str] = []
        self._lost: str | None = None

    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        self.made.append(label)
        return Buffer(bytearray(b"\xff" * size), size, label, usage)

    def _clear_buffers(self, buffers: list[Buffer]) -> None:
        for buf in buffers:
            buf.handle[:] = bytes(buf.size)
            self.cleared.append(buf.label)

    def destroy_buffer(self, buffer: Buffer) -> None:
        self.destroyed.append(buffer.label)

    @property
    def lost(self) -> str | None:
        return self._lost


def test_a_released_buffer_is_taken_by_size_and_usage_and_cleared() -> None:
    dev = Ledger()
    first = dev.acquire_buffers({"q": (64, STORAGE), "o": (32, STORAGE), "p": (16, ("UNIFORM",))})
    first["q"].handle[:] = b"\x01" * 64
    dev.release_buffers(list(first.values()))
    assert dev.destroyed == ["p"]  # without COPY_DST it cannot be cleared: not kept
    second = dev.acquire_buffers({"k": (64, STORAGE), "o": (48, STORAGE)})
    assert second["k"].handle is first["q"].handle and second["k"].label == "k"
    assert dev.cleared == ["q"] and bytes(second["k"].handle) == bytes(64)
    # the 32-byte buffer matched nothing: destroyed before the new 48-byte one was made
    assert dev.destroyed == ["p", "o"] and dev.made == ["q", "o", "p", "o"]


def test_usage_must_match_and_a_lost_device_keeps_nothing() -> None:
    dev = Ledger()
    bufs = dev.acquire_buffers({"a": (64, STORAGE)})
    dev.release_buffers(list(bufs.values()))
    dev.acquire_buffers({"b": (64, ("STORAGE", "COPY_SRC", "COPY_DST"))})
    assert dev.cleared == [] and dev.destroyed == ["a"]
    dev._lost = "destroyed"
    dev.release_buffers([Buffer(bytearray(4), 4, "c", STORAGE)])
    assert dev.destroyed == ["a", "c"]
    assert dev.acquire_buffers({"d": (4, STORAGE)})["d"].label == "d" and dev.made[-1] == "d"


def test_transfers_are_staged_in_groups_of_at_most_max_buffer_size() -> None:
    dev = Ledger()
    dev.limits["maxBufferSize"] = 100
    bufs = [Buffer(None, n, str(n)) for n in (40, 52, 4, 100, 12, 8)]
    groups = dev.staged([(b, b.size) for b in bufs])
    assert [[(s.buffer.label, s.offset) for s in g] for g in groups] == [
        [("40", 0), ("52", 40), ("4", 96)],  # offsets are multiples of 8
        [("100", 0)],
        [("12", 0), ("8", 16)],
    ]


def test_a_failed_clear_keeps_nothing() -> None:
    dev = Ledger()
    dev.release_buffers(list(dev.acquire_buffers({"a": (64, STORAGE)}).values()))

    def fail(buffers: list[Buffer]) -> None:
        raise RuntimeError("device lost")

    dev._clear_buffers = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="device lost"):
        dev.acquire_buffers({"b": (64, STORAGE), "c": (8, STORAGE)})
    assert dev.destroyed == ["a"] and dev._spares == []


async def _reuse_report(impl: str) -> dict[str, bool]:
    """Run in a child process of the runtime's environment (Dawn's driver is chosen before
    it loads): a case run after another of its shape, on that one's buffers (which hold its
    inputs and outputs), against the same case on a new device; and a reused buffer that
    was written read back."""
    from py_harness.host.gpu import native

    cfg = AttentionConfig(1, 2, 37, 70, 24, causal=True)
    rng = np.random.default_rng(5)
    draws = [
        {
            n: rng.standard_normal(cfg.q_elems() if n in ("q", "d_out") else cfg.kv_elems())
            .astype("<f4")
            .tobytes()
            for n in ("q", "k", "v", "d_out")
        }
        for _ in range(2)
    ]
    got = []
    for inputs in (draws[1:], draws):
        dev = await native.request_device(implementation=impl)
        run = runner.AttentionRunner(dev, shader_sources(), variant("fast"))
        for x in inputs:
            result = await run.run(cfg, x)
        got.append({n: bytes(v) for n, v in result.outputs.items()})
    # Each dispatch is submitted before the last one is read: three backward runs in a row
    # give the bits of one, and a forward alone its own outputs only.
    repeated = await run.run(cfg, draws[-1], backward_runs=3)
    forward = await run.run(cfg, draws[-1], backward=False)
    grads = ("dq", "dk", "dv")
    spares = list(dev._spares)
    for buf in spares:
        dev.write_buffer(buf, b"\x07" * buf.size)
    out = next(b for b in spares if "COPY_SRC" in b.usage)  # an output's: readable
    again = dev.acquire_buffers({"again": (out.size, out.usage)})["again"]
    zeros = await dev.read_buffer(again)
    # uploads and reads in groups of at most maxBufferSize bytes (here 64: one per group)
    dev.limits["maxBufferSize"] = 64
    small = dev.acquire_buffers(
        {f"b{i}": (48, ("STORAGE", "COPY_SRC", "COPY_DST")) for i in range(3)}
    )
    written = [bytes(range(i, i + 48)) for i in range(3)]
    dev.write_buffers(list(zip(small.values(), written, strict=True)))
    back = await dev.read_buffers([(b, 48) for b in small.values()])
    dev.destroy()
    return {
        "outputs": sorted(got[0]) == ["dk", "dq", "dv", "lse", "o"],
        "same bits": got[0] == got[1],
        "kept": any(again is buf for buf in spares),
        "cleared": bytes(zeros) == bytes(again.size),
        "grouped": [bytes(b) for b in back] == written,
        "repeated runs": len(set(repeated.backward_digests)) == 1
        and len(repeated.backward_digests) == 3
        and all(bytes(repeated.outputs[n]) == got[1][n] for n in grads),
        "forward alone": sorted(forward.outputs) == ["lse", "o"]
        and "backward_ms" not in forward.timings_ms
        and all(bytes(forward.outputs[n]) == got[1][n] for n in ("o", "lse")),
        "readbacks kept": len(dev._readbacks) <= KEPT_READBACKS,
    }


@pytest.mark.parametrize("impl", NATIVE)
def test_reused_buffers_give_the_bits_of_new_ones(impl: str) -> None:
    report = child_report(impl, "tests.test_host_path", "_reuse_report")
    assert report == dict.fromkeys(
        (
            "outputs",
            "same bits",
            "kept",
            "cleared",
            "grouped",
            "repeated runs",
            "forward alone",
            "readbacks kept",
        ),
        True,
    )


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 KiB, so that small arrays take the threaded path."""
    monkeypatch.setattr(host_memory, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(host_memory, "THREADS", 3)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("nbytes", [0, 4, 4096, 3 * 4096 + 12, 40000])
def test_copy_out_copies_every_byte(nbytes: int) -> None:
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    view = memoryview(src.tobytes())
    [got] = host_memory.copy_out([view])
    assert bytes(got) == view.tobytes()
    assert np.shares_memory(np.frombuffer(got, np.uint8), src) is False


def test_copy_out_takes_any_format() -> None:
    floats = memoryview(np.arange(1000, dtype="<f4"))  # len() counts floats, not bytes
    assert bytes(host_memory.copy_out([floats])[0]) == floats.tobytes()


def _address(data: memoryview) -> int:
    return np.frombuffer(data, np.uint8).ctypes.data


@pytest.mark.usefixtures("small_chunks")
def test_copy_out_refills_memory_only_once_nothing_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repeated size reuses the last copy's memory (fresh pages are what made the copy
    slow), but never while the copy or anything made from it is alive."""
    monkeypatch.setattr(host_memory, "_destinations", host_memory._Destinations())
    rng = np.random.default_rng(7)
    srcs = [rng.integers(0, 256, 40000, dtype=np.uint8).tobytes() for _ in range(4)]
    first = host_memory.copy_out([memoryview(srcs[0])])[0]
    at = _address(first)
    second = host_memory.copy_out([memoryview(srcs[1])])[0]  # first still held
    assert _address(second) != at and bytes(first) == srcs[0]
    part = np.frombuffer(first[100:200], np.uint8)  # a view made from the first copy
    del first, second
    third = host_memory.copy_out([memoryview(srcs[2])])[0]  # second's memory is free, not first's
    assert _address(third) != at and part.tobytes() == srcs[0][100:200]
    del part
    fourth = host_memory.copy_out([memoryview(srcs[3])])[0]
    assert _address(fourth) == at and bytes(fourth) == srcs[3] and bytes(third) == srcs[2]


def test_copy_out_keeps_at_most_max_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = host_memory._Destinations()
    monkeypatch.setattr(kept, "MAX_BYTES", 25000)
    monkeypatch.setattr(host_memory, "_destinations", kept)
    for n in (10000, 10004, 10008):  # the third pushes the oldest free one out
        host_memory.copy_out([memoryview(bytes(n))])
    assert [a.nbytes for a, _ in kept._kept] == [10004, 10008]
    held = host_memory.copy_out([memoryview(bytes(20000)) for _ in range(2)])
    assert sum(a.nbytes for a, _ in kept._kept) == 40000  # in use: kept over the limit
    del held


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("nbytes", [0, 4, 4096, 3 * 4096 + 12, 40000])
def test_copy_into_fills_the_first_bytes_only(nbytes: int) -> None:
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    dst = bytearray(b"\xa5" * (nbytes + 9))
    host_memory.copy_into([(memoryview(dst), src.tobytes())])
    assert dst[:nbytes] == src.tobytes()
    assert dst[nbytes:] == b"\xa5" * 9


@pytest.mark.usefixtures("small_chunks")
def test_threaded_finite_check_finds_each_kind_in_each_chunk() -> None:
    """NaN, +Inf and -Inf at the first and last float, on chunk boundaries and inside: the
    threaded check says what config.any_nonfinite says, over 4 chunks of 4 KiB."""
    base = np.random.default_rng(1).standard_normal(4 * 1024 + 3).astype("<f4")
    assert len(host_memory._chunks(base.nbytes)) == 3  # THREADS chunks at most
    assert host_memory.nonfinite([base.tobytes()]) == [False]
    for bad in (np.nan, np.inf, -np.inf):
        for at in (0, 1023, 1024, 2048, 3000, len(base) - 1):
            x = base.copy()
            x[at] = bad
            assert host_memory.nonfinite([x.tobytes()]) == [True], (bad, at)
            assert config.any_nonfinite(x.tobytes())
    assert host_memory.nonfinite([b""]) == [False]


@pytest.mark.usefixtures("small_chunks")
def test_several_tensors_are_cut_across_the_threads_as_one() -> None:
    """A case's tensors go to the threads as one run of bytes: a thread's task may hold the
    end of one and the start of the next. Each is copied to its own destination and judged
    finite or not on its own, whatever its size (empty, one float, across tasks)."""
    rng = np.random.default_rng(3)
    sizes = [5000, 0, 1, 3000, 7]  # floats
    tensors = [rng.standard_normal(n).astype("<f4") for n in sizes]
    tasks = host_memory._tasks([t.nbytes for t in tensors])
    assert len(tasks) == 3 and any(len(pieces) > 1 for pieces in tasks)
    assert host_memory.nonfinite([t.tobytes() for t in tensors]) == [False] * 5
    for i in (0, 2, 3, 4):
        for at in (0, -1):
            bad = [t.copy() for t in tensors]
            bad[i][at] = np.nan
            got = host_memory.nonfinite([t.tobytes() for t in bad])
            assert got == [j == i for j in range(5)], (i, at)
    dsts = [bytearray(t.nbytes + 3) for t in tensors]
    host_memory.copy_into(
        [(memoryview(d), t.tobytes()) for d, t in zip(dsts, tensors, strict=True)]
    )
    assert [bytes(d[: t.nbytes]) for d, t in zip(dsts, tensors, strict=True)] == [
        t.tobytes() for t in tensors
    ]
    copies = host_memory.copy_out([memoryview(t) for t in tensors])
    assert [bytes(c) for c in copies] == [t.tobytes() for t in tensors]


def test_blobs_and_base64_bring_back_the_same_bits(harness) -> None:  # noqa: ANN001
    """run_on sends the tensors as bytes beside the JSON to the sessions that take them
    (wgpu in this process, Dawn's worker) and as base64 to the others. The same case sent
    as base64 comes back bit for bit the same, and a tensor that names no blob is refused
    with its name."""
    if not harness.takes_blobs:
        pytest.skip(f"{harness.runtime} takes base64 only")
    case = Case(24, 37, 70, num_heads=2, num_kv_heads=2, causal=True)
    cfg, x = case.config(), make_inputs(case)
    got = run_on(harness, cfg, x, variant="fast")["arrays"]
    request = {
        "config": cfg.to_dict(),
        "tensors": encode_tensors(x),
        "sources": variants.sources("fast"),
        "variant": variants.request_form("fast"),
    }
    as_base64 = decode_outputs(cfg, harness.call("run_case", request)["outputs"])
    assert sorted(got) == sorted(as_base64) == ["dk", "dq", "dv", "lse", "o"]
    assert all(got[n].tobytes() == as_base64[n].tobytes() for n in got)
    request["tensors"] = {n: i for i, n in enumerate(x)} | {"q": 7}
    refused = "q: must be base64 or the index of one of 4 blobs"
    with pytest.raises((PageError, config.ConfigError), match=refused):  # a worker's, or ours
        harness.call_blobs("run_case", request, tensor_blobs(x.values()))


def test_only_the_entries_that_take_tensors_take_blobs() -> None:
    service = HarnessService(request_device=None, load_source=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'ping' takes no blobs \(those that do: run_case"):
        own_thread(asyncio.run, service.call_blobs("ping", "{}", [b""]))
