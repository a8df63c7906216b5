"""The harness's request/response API, the same on every runtime.

Each method takes and returns a JSON string; tensors travel as base64 of little-endian
f32 bytes (from the host's native sessions also as bytes beside the JSON: run_case_blobs).
In the browser, page.py binds it to navigator.gpu; on the host, the native session binds
it to wgpu-py. Either way the runner sees only the Device interface.
"""

from __future__ import annotations

import inspect
import json
import pickle
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import base64_tensors, probes
from .config import AttentionConfig, ConfigError, validate
from .gpu.device import Bytes, Device
from .kernels import DEFAULT_VARIANT, VARIANTS, Variant, variant
from .reference_cost import check_reference_cost
from .runner import AttentionRunner
from .sizing import validate_sizes
from .timing import TimingPlan, time_variant

# The service's entries: each takes and returns a JSON string. The page (page.py) and the
# native worker (host/runtimes/native_worker.py) expose these and nothing else.
ENTRIES = (
    "ping",
    "adapter",
    "validate_config",
    "compile_kernels",
    "run_case",
    "time_case",
    "probe_loops",
    "probe_workgroup_zero",
    "destroy_device",
    "run_python",
)
BLOB_ENTRIES = ("run_case", "time_case")  # those whose tensors may come as bytes (call_blobs)


class HarnessService:
    def __init__(
        self,
        request_device: Callable[[], Awaitable[Device]],
        load_source: Callable[[str], Awaitable[str]],
    ) -> None:
        self._request_device = request_device
        self._load_source = load_source
        self._device: Device | None = None
        self._served_sources: dict[str, str] = {}
        self.devices_created = 0

    async def device(self) -> Device:
        """One device at a time; a lost device is replaced on the next call."""
        if self._device is None or self._device.lost is not None:
            self._device = await self._request_device()
            self.devices_created += 1
        return self._device

    async def _runner(self, request: dict) -> AttentionRunner:
        """The runner for the request's variant, with WGSL from the request (the host sends
        the files it has) or else the served files (fetched once)."""
        chosen = request_variant(request.get("variant", DEFAULT_VARIANT))
        sources = request.get("sources")
        if not sources:
            for f in chosen.files:
                if f not in self._served_sources:
                    self._served_sources[f] = await self._load_source(f)
            sources = self._served_sources
        return AttentionRunner(await self.device(), sources, chosen)

    async def ping(self, request_json: str) -> str:
        return json.dumps({"pong": json.loads(request_json), "python": sys.version})

    async def adapter(self, request_json: str) -> str:
        """The adapter's info, the device's limits and features, and the variants it runs
        (not those needing a feature it lacks: shader-f16 for fast_f16)."""
        device = await self.device()
        return json.dumps(
            {
                "backend": device.backend,
                "info": device.adapter_info,
                "limits": device.limits,
                "features": sorted(device.features),
                "variants": {
                    name: v.description
                    for name, v in VARIANTS.items()
                    if v.missing_features(device.features) is None
                },
            }
        )

    async def validate_config(self, request_json: str) -> str:
        """request: {config, limits?} -> {ok: true} or {ok: false, argument, message}, the
        message being the ConfigError text the API raises (the demo page's form shows it).
        limits: the server's reference_limits (/api/info), so the form refuses what the
        server would refuse, in its words. Buffer sizes are checked against the device's
        limits only when a device is open already: validating a form must not request one."""
        try:
            request = json.loads(request_json)
            cfg = AttentionConfig.from_dict(request["config"])
            validate(cfg)
            if request.get("limits"):
                check_reference_cost(cfg, request["limits"])
            if self._device is not None and self._device.lost is None:
                validate_sizes(cfg, self._device.limits)
        except ConfigError as exc:
            return json.dumps({"ok": False, "argument": exc.argument, "message": str(exc)})
        except TypeError as exc:  # a field missing from the config: from_dict's cls(**d)
            return json.dumps({"ok": False, "argument": "config", "message": f"config: {exc}"})
        return json.dumps({"ok": True})

    async def compile_kernels(self, request_json: str) -> str:
        """Compile every pipeline for the request's sources now; returns the time in ms."""
        request = json.loads(request_json)
        runner = await self._runner(request)
        return json.dumps({"compile_ms": await runner.prepare()})

    async def run_case(self, request_json: str) -> str:
        """request: {config, tensors: {name: base64}, variant?, sources?, backward?,
        backward_runs?}. variant: a built-in's name, or a declaration (request_variant)."""
        reply, outputs = await self._run_case(request_json, ())
        reply["outputs"] = {n: base64_tensors.encode(b) for n, b in outputs.items()}
        return json.dumps(reply)

    async def run_case_blobs(
        self, request_json: str, blobs: Sequence[Bytes]
    ) -> tuple[str, list[Bytes]]:
        """run_case with the tensors as bytes beside the JSON, for the host's native sessions
        (no base64, no JSON pass over them; in the host's process not even a copy): the
        request's tensors are {name: index in blobs}, the reply's outputs {name: index in
        the blobs returned}. Not a page entry: the page speaks JSON strings only."""
        reply, outputs = await self._run_case(request_json, blobs)
        reply["outputs"] = {n: i for i, n in enumerate(outputs)}
        return json.dumps(reply), list(outputs.values())

    async def call_blobs(
        self, entry: str, request_json: str, blobs: Sequence[Bytes]
    ) -> tuple[str, list[Bytes]]:
        """An entry that takes tensors (BLOB_ENTRIES) with them as blobs: run_case_blobs,
        or time_case (whose reply has no tensors)."""
        if entry == "run_case":
            return await self.run_case_blobs(request_json, blobs)
        if entry == "time_case":
            return await self.time_case(request_json, blobs), []
        raise ValueError(f"{entry!r} takes no blobs (those that do: {', '.join(BLOB_ENTRIES)})")

    async def _run_case(
        self, request_json: str, blobs: Sequence[Bytes]
    ) -> tuple[dict, dict[str, Bytes]]:
        t0 = time.perf_counter()
        request, cfg, tensors = _case_request(request_json, blobs)
        runner = await self._runner(request)
        result = await runner.run(
            cfg,
            tensors,
            backward=request.get("backward", True),
            backward_runs=request.get("backward_runs", 1),
        )
        timings = dict(result.timings_ms)
        timings["service_total_ms"] = (time.perf_counter() - t0) * 1e3
        reply = {
            "timings_ms": timings,
            "timing_source": result.timing_source,
            "backward_digests": result.backward_digests,
        }
        return reply, result.outputs

    async def time_case(self, request_json: str, blobs: Sequence[Bytes] = ()) -> str:
        """request: {config, tensors, variant?, sources?, runs?, warmup?, warmup_ms?} ->
        timing.time_variant's numbers (what `bench` tables), measured here. tensors: base64,
        or indexes in blobs (as run_case_blobs takes them)."""
        request, cfg, tensors = _case_request(request_json, blobs)
        plan = TimingPlan(
            **{k: request[k] for k in ("runs", "warmup", "warmup_ms") if k in request}
        )
        runner = await self._runner(request)
        return json.dumps(await time_variant(runner, cfg, tensors, plan))

    async def run_python(self, request_json: str) -> str:
        """request: {source, name, args}: the function `name` that `source` defines, called
        here (in the page's Pyodide, in Node, or in the native runtime's process) as
        name(service, *args), awaited where it is a coroutine; args and the value it returns
        are pickled, as base64 (the host's run_in_page fixture). The service is this one:
        its device and entries, and py_harness's modules to import, are at hand."""
        request = json.loads(request_json)
        namespace: dict[str, Any] = {"__name__": "run_in_page"}
        exec(compile(request["source"], f"<run_in_page {request['name']}>", "exec"), namespace)
        args = pickle.loads(base64_tensors.decode("args", request["args"]))
        value = namespace[request["name"]](self, *args)
        if inspect.isawaitable(value):
            value = await value
        return json.dumps({"value": base64_tensors.encode(pickle.dumps(value, protocol=4))})

    async def probe_loops(self, request_json: str) -> str:
        """Run the loop-budget probe (probes.py) on this session's device."""
        return json.dumps(await probes.probe_loops(await self.device()))

    async def probe_workgroup_zero(self, request_json: str) -> str:
        """Run the workgroup-zeroing probe (probes.py) on this session's device."""
        return json.dumps(await probes.probe_workgroup_zero(await self.device()))

    async def destroy_device(self, request_json: str) -> str:
        """Destroy the current device (to test device-loss recovery)."""
        if self._device is not None:
            self._device.destroy()
        return json.dumps({"destroyed": self._device is not None})


def request_variant(spec: object) -> Variant:
    """A request's `variant`: a built-in's name, or a declaration (Variant.to_dict's form,
    e.g. from a variant file) whose WGSL the request's `sources` carry."""
    if isinstance(spec, str):
        return variant(spec)
    if isinstance(spec, dict):
        return Variant.from_dict(spec)
    raise ConfigError(
        "variant", f"must be a variant's name or its declaration (a dict), got {spec!r}"
    )


def _case_request(
    request_json: str, blobs: Sequence[Bytes] = ()
) -> tuple[dict, AttentionConfig, dict[str, Bytes]]:
    """(request, config, tensors as bytes), the config validated before any GPU work. A
    tensor is base64, or the index of its bytes in blobs."""
    request = json.loads(request_json)
    cfg = AttentionConfig.from_dict(request["config"])
    validate(cfg)  # refuse bad input before asking for a device
    tensors: dict[str, Bytes] = {}
    for name, data in request["tensors"].items():
        if isinstance(data, str):
            tensors[name] = base64_tensors.decode(name, data)
        elif isinstance(data, int) and not isinstance(data, bool) and 0 <= data < len(blobs):
            tensors[name] = blobs[data]
        else:
            raise ConfigError(
                name, f"must be base64 or the index of one of {len(blobs)} blobs, got {data!r}"
            )
    return request, cfg, tensors
