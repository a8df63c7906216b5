"""Variants as data: the dict round trip and its checks, features and refusals, params
layouts, packed buffers, buffer sizes in one place, and the runner making only the
buffers a variant binds (no GPU: a device that records what it is asked for)."""

from __future__ import annotations

import asyncio
import json
import struct
from array import array
from dataclasses import replace

import pytest

from py_harness import layouts
from py_harness.config import AttentionConfig, ConfigError
from py_harness.gpu.device import Buffer, Span
from py_harness.kernels import FAST, RO, RW, SEED, UNIFORM, VARIANTS, Kernel, Variant
from py_harness.params import DEFAULT_PARAMS, PARAMS_SIZE, pack_params, params_size
from py_harness.runner import Split, create_buffers, read_outputs
from py_harness.service import request_variant
from py_harness.sizing import buffer_sizes, validate_sizes
from tests.fakes import NoGPUWorkDevice, own_thread

CFG = AttentionConfig(2, 6, 7, 5, 3, num_kv_heads=2)


def floats(n: int, start: float = 0.0) -> bytes:
    return array("f", [start + i for i in range(n)]).tobytes()


def packed_kv() -> Variant:
    """The seed's declaration with K and V packed: kv for k and v, dkv for dk and dv."""

    def repack(k: Kernel) -> Kernel:
        b = {n: rk for n, rk in k.bindings.items() if rk[0] not in ("k", "v", "dk", "dv")}
        if any(r == "k" for r, _ in k.bindings.values()):
            b[1] = ("kv", RO)
        if any(r == "dk" for r, _ in k.bindings.values()):
            b[6] = ("dkv", RW)
        return replace(k, bindings=b)

    fwd, *bwd = (repack(k) for k in (SEED.forward, *SEED.backward))
    return replace(SEED, name="packed", forward=fwd, backward=tuple(bwd))


# ---- the dict form ------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*VARIANTS, "packed"])
def test_variants_round_trip_through_json(name: str) -> None:
    v = packed_kv() if name == "packed" else VARIANTS[name]
    d = json.loads(json.dumps(v.to_dict()))
    assert Variant.from_dict(d) == v
    assert request_variant(d) == v  # what the service accepts ...
    if name in VARIANTS:
        assert request_variant(name) is v  # ... and built-ins by name, as before


@pytest.mark.parametrize(
    ("edit", "argument", "words"),
    [
        (lambda d: d.pop("forward"), "variant.forward", "is missing"),
        (lambda d: d.update(colour=1), "variant.colour", "unknown field"),
        (
            lambda d: d["backward"][1]["bindings"].update({"11": ["sdtats", RW]}),
            "variant.backward[1].bindings",
            "unknown role 'sdtats'",
        ),
        (
            lambda d: d["forward"]["bindings"].update({"3": ["o", RO]}),
            "variant.forward",
            "must bind o read-write",
        ),
        (
            lambda d: d["backward"][0]["bindings"].update({"5": ["dq", RO]}),
            "variant.backward[0].bindings",
            "dq is written: it must be read-write",
        ),
        (
            lambda d: d["forward"]["bindings"].update({"8": ["params", RO]}),
            "variant.forward.bindings",
            "params cannot be bound as read-only-storage",
        ),
        (lambda d: d["forward"].update(rows="keys"), "variant.forward.rows", "seq_q, seq_k"),
        (
            lambda d: d["forward"].update(rows_per_workgroup=0),
            "variant.forward.rows_per_workgroup",
            ">= 1",
        ),
        (
            lambda d: d.update(params=["batch_size", "heads"]),
            "variant.params",
            "unknown field 'heads'; known: batch_size",
        ),
        (lambda d: d.update(supports=["causal", "rope"]), "variant.supports", "unknown ['rope']"),
        (lambda d: d.update(max_head_dim=257), "variant.max_head_dim", "[1, 256]"),
        (lambda d: d["backward"][1]["bindings"].pop("7"), "variant.backward", "writes no ['dv']"),
        (
            lambda d: d["forward"]["bindings"].update({"2": ["kv", RO]}),
            "variant.bindings",
            "binds kv and ['k', 'v']",
        ),
        (
            lambda d: [k["bindings"].pop("9") for k in (d["forward"], *d["backward"])],
            "variant.supports",
            "no kernel binds mask",
        ),
        (lambda d: d.update(name="a b"), "variant.name", "letters, digits"),
    ],
)
def test_a_bad_declaration_names_its_field(edit, argument: str, words: str) -> None:  # noqa: ANN001
    d = json.loads(json.dumps(SEED.to_dict()))
    edit(d)
    with pytest.raises(ConfigError) as err:
        Variant.from_dict(d)
    assert err.value.argument == argument, str(err.value)
    assert words in str(err.value)


def test_the_service_refuses_a_variant_that_is_neither_name_nor_dict() -> None:
    with pytest.raises(ConfigError, match=r"variant: must be a variant's name or its declaration"):
        request_variant(["seed"])


# ---- features -----------------------------------------------------------------------------
def test_refusal_names_the_feature_and_the_setting() -> None:
    v = replace(packed_kv(), supports=frozenset({"causal", "mask"}), max_head_dim=64)
    assert v.refusal(AttentionConfig(1, 4, 8, 8, 64, causal=True)) is None
    cases = [
        (dict(dropout_p=0.1), "packed does not support dropout (dropout_p=0.1)"),
        (dict(num_kv_heads=2), "packed does not support gqa (num_heads=4, num_kv_heads=2)"),
        (dict(window=3), "packed does not support window (window=3)"),
        (dict(causal=True, causal_offset=2), "does not support causal_offset (causal_offset=2)"),
        (dict(head_dim=65), "packed supports head_dim <= 64 (head_dim=65)"),
    ]
    for kw, reason in cases:
        got = v.refusal(
            AttentionConfig(**{**dict(batch=1, num_heads=4, seq_q=8, seq_k=8, head_dim=64), **kw})
        )
        assert got is not None and reason in got, (kw, got)
    # an offset without causal or a window changes nothing, so it needs no support
    assert v.refusal(AttentionConfig(1, 4, 8, 8, 64, causal_offset=5)) is None
    assert SEED.refusal(AttentionConfig(1, 4, 8, 8, 64, dropout_p=0.5, window=2)) is None


def test_the_runner_refuses_an_unsupported_config_before_gpu_work() -> None:
    from py_harness.runner import AttentionRunner

    v = replace(SEED, name="nodrop", supports=frozenset({"causal", "mask", "gqa"}))
    sources = dict.fromkeys(SEED.files, "")  # never compiled: refused first
    runner = AttentionRunner(NoGPUWorkDevice(), sources, v)
    cfg = AttentionConfig(1, 2, 4, 4, 8, dropout_p=0.2)
    with pytest.raises(ConfigError, match=r"variant: nodrop does not support dropout"):
        own_thread(asyncio.run, runner.run(cfg, {}))


# ---- params layouts -------------------------------------------------------------------------
def test_params_pack_in_any_declared_order() -> None:
    cfg = AttentionConfig(2, 6, 113, 203, 59, num_kv_heads=2, window=17, seed=9)
    layout = ("seq_k", "window", "scale", "_pad0", "num_kv_heads")
    data = pack_params(cfg, layout)
    assert len(data) == params_size(layout) == 32  # 5 words, rounded up to 16 bytes
    seq_k, window, scale, pad, kv, *rest = struct.unpack("<IIfII3I", data)
    assert (seq_k, window, pad, kv, rest) == (203, 17, 0, 2, [0, 0, 0])
    assert scale == pytest.approx(59**-0.5, rel=1e-7)
    assert len(pack_params(cfg)) == PARAMS_SIZE == params_size(DEFAULT_PARAMS) == 112
    with pytest.raises(ConfigError, match=r"params: unknown field 'sead'.*known: batch_size"):
        pack_params(cfg, ("seq_q", "sead"))


# ---- packed buffers -------------------------------------------------------------------------
def test_kv_packs_each_key_row_as_k_then_v_and_splits_back() -> None:
    d, rows = CFG.head_dim, CFG.batch * CFG.seq_k * CFG.kv_heads
    k, v = floats(rows * d), floats(rows * d, 1000.0)
    kv = array("f", layouts.to_kernel(CFG, "kv", {"k": k, "v": v}))
    row = 4  # [B, Sk, Hkv, 2, D]: row r holds K's row r, then V's row r
    assert list(kv[row * 2 * d : row * 2 * d + 2 * d]) == [*range(12, 15), *range(1012, 1015)]
    assert layouts.from_kernel(CFG, "dkv", kv.tobytes()) == {"dk": k, "dv": v}


def test_qkv_packs_each_position_and_splits_back() -> None:
    cfg = AttentionConfig(2, 3, 4, 4, 2)  # chunks of H x D = 6 floats, fewer rows than 6
    n = cfg.q_elems()
    q, k, v = floats(n), floats(n, 100.0), floats(n, 200.0)
    qkv = array("f", layouts.to_kernel(cfg, "qkv", {"q": q, "k": k, "v": v}))
    assert list(qkv[18:36]) == [*range(6, 12), *range(106, 112), *range(206, 212)]
    assert layouts.from_kernel(cfg, "dqkv", qkv.tobytes()) == {"dq": q, "dk": k, "dv": v}
    # a variant binding qkv runs only where Q and K have as many rows and heads
    fwd = Kernel(
        "f", ("a.wgsl",), {0: ("qkv", RO), 1: ("o", RW), 2: ("lse", RW)}, "seq_q", "num_heads"
    )
    bwd = Kernel("b", ("a.wgsl",), {0: ("qkv", RO), 1: ("dqkv", RW)}, "seq_q", "num_heads")
    packed = Variant("qkv", "", fwd, (bwd,), supports=frozenset({"causal"}))
    assert packed.storage_roles == ("qkv", "o", "lse", "dqkv")
    assert packed.refusal(AttentionConfig(1, 2, 4, 4, 8)) is None
    assert "needs seq_q == seq_k (seq_q=4, seq_k=5)" in packed.refusal(
        AttentionConfig(1, 2, 4, 5, 8)
    )
    with pytest.raises(ConfigError, match="supports: gqa: a qkv buffer holds as many"):
        replace(packed, supports=frozenset({"gqa"}))
    # the runner builds qkv from the host's tensors and splits dqkv into dq, dk, dv
    dev = Recorder()
    bufs = create_buffers(dev, cfg, {"q": q, "k": k, "v": v}, Split(), packed)
    assert sorted(bufs) == sorted(packed.storage_roles)  # binds no params: none made
    bufs["dqkv"].handle[: 3 * len(q)] = qkv.tobytes()
    got = own_thread(asyncio.run, read_outputs(dev, cfg, bufs, ("dq", "dk", "dv")))
    assert got == {"dq": q, "dk": k, "dv": v}


# ---- buffer sizes -------------------------------------------------------------------------
def test_buffer_sizes_are_computed_in_one_place() -> None:
    cfg = replace(CFG, mask_shape=(7, 5))
    sizes = buffer_sizes(cfg, (*packed_kv().storage_roles, "k", "dqkv"), slots=2)
    q, kv, rows = 2 * 7 * 6 * 3, 2 * 5 * 2 * 3, 2 * 6 * 7
    assert sizes == {
        "q": q,
        "d_out": q,
        "mask": 35,
        "kv": 2 * kv,
        "o": q,
        "lse": rows,
        "dq": q,
        "dkv": 2 * kv,
        "stats": 2 * rows + 2 * rows * 3,  # [Delta, LSE], then 2 partial dQ sums (vec4s)
        "k": kv,
        "dqkv": q + 2 * kv,
    }
    with pytest.raises(KeyError, match="unknown"):
        buffer_sizes(cfg, ("kvq",))
    # a packed buffer over the limit is refused by its own name
    limits = {"maxStorageBufferBindingSize": 128, "maxBufferSize": 1 << 30}
    small = AttentionConfig(1, 2, 1, 5, 3, num_kv_heads=2)  # K: 30 floats, 128 bytes in vec4s
    validate_sizes(small, limits)  # the seed's buffers fit
    with pytest.raises(ConfigError, match=r"^kv: needs a 240-byte buffer, over .* 128 bytes"):
        validate_sizes(small, limits, packed_kv().storage_roles)


class Recorder(NoGPUWorkDevice):
    """Makes and fills buffers (bytearrays) and reads them back; no other GPU work.
    groups: each staging buffer's reads, as (buffer label, offset, bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[list[tuple[str, int, int]]] = []

    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        return Buffer(bytearray(size), size, label)

    def write_buffer(self, buffer: Buffer, data: bytes) -> None:
        buffer.handle[: len(data)] = data

    def _encoder(self) -> list:
        return []

    def _encode_copy(self, encoder: list, src: Buffer, dst: Buffer, at: int, n: int) -> None:
        encoder.append((src, dst, at, n))

    async def _submit(self, encoder: list) -> None:
        for src, dst, at, n in encoder:
            dst.handle[at : at + n] = src.handle[:n]

    async def _map_read(self, staging: Buffer, spans: list[Span], total: int) -> list[bytes]:
        self.groups.append([(s.buffer.label, s.offset, s.nbytes) for s in spans])
        assert total == sum(s.nbytes for s in spans) <= self.limits["maxBufferSize"]
        return [bytes(staging.handle[s.offset : s.offset + s.nbytes]) for s in spans]


def test_reads_share_staging_buffers_up_to_max_buffer_size() -> None:
    dev = Recorder()
    dev.limits = {**dev.limits, "maxBufferSize": 64}
    bufs = [dev.create_buffer(48, ("STORAGE",), f"b{i}") for i in range(4)]
    for i, b in enumerate(bufs):
        dev.write_buffer(b, bytes([i + 1]) * 48)
    reads = [(bufs[0], 16), (bufs[1], 48), (bufs[2], 32), (bufs[3], 32)]
    got = own_thread(asyncio.run, dev.read_buffers(reads))
    assert got == [bytes([1]) * 16, bytes([2]) * 48, bytes([3]) * 32, bytes([4]) * 32]
    # in order, packed from offset 0, a new staging buffer where the next would pass 64
    assert dev.groups == [[("b0", 0, 16), ("b1", 16, 48)], [("b2", 0, 32), ("b3", 32, 32)]]


def test_the_runner_makes_only_the_bound_buffers_and_splits_dkv() -> None:
    d = CFG.head_dim
    x = {n: floats(e) for n, e in buffer_sizes(CFG, ("q", "k", "v", "d_out")).items()}
    dev = Recorder()
    v = packed_kv()
    bufs = create_buffers(dev, CFG, x, Split(), variant=v)
    assert sorted(bufs) == sorted((*v.storage_roles, "params"))  # no k, v, dk, dv buffers
    assert "mask" in bufs and bufs["mask"].size == 16  # absent: a one-vec4 placeholder
    assert bufs["kv"].handle[: 4 * 2 * d] == x["k"][: 4 * d] + x["v"][: 4 * d]
    for buf in bufs.values():
        assert buf.size % 16 == 0
    # the backward would write dK and dV packed; the host gets them apart
    bufs["dkv"].handle[: len(x["k"]) * 2] = layouts.to_kernel(CFG, "kv", {"k": x["v"], "v": x["k"]})
    got = own_thread(asyncio.run, read_outputs(dev, CFG, bufs, ("dq", "dk", "dv")))
    assert got["dk"] == x["v"] and got["dv"] == x["k"] and len(got["dq"]) == len(x["q"])
    # the seed binds every separate buffer, as before
    assert sorted(create_buffers(dev, CFG, x, Split(), FAST)) == sorted(
        (*FAST.storage_roles, "params")
    )
    assert "k" in FAST.storage_roles and UNIFORM not in FAST.storage_roles
