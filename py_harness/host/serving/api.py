"""The demo page's /api/ endpoints: the NumPy side of server.py.

server.py imports this module on the first /api/ request (NumPy loads then) and runs the
costly endpoints (policy.COSTLY) one at a time. Judging reuses verdict.judge_outputs (and, for the
case matrix, judge.inputs.judge_case itself), so the page's verdicts are the harness's verdicts.

    GET  /api/info                 max body size, limits the kernels need, variants
    GET  /api/cases[?set=all][&variant=V&adapter=A]
                                   the SMOKE cases (or the whole matrix): ids, configs and,
                                   with a variant, the declared limitation covering each
    GET  /api/inputs?case=ID       evaluate.make_inputs(case) as base64 f32
    POST /api/judge                {config, inputs, outputs, variant?, adapter?}
                                   -> status, reports, reference, errors
    POST /api/judge_case           {case, variant, runtime, adapter, reply}
                                   -> CaseResult, status, covered

Tensors travel as base64 of little-endian f32 bytes inside JSON, the same encoding as
run_case's request and reply, so the page forwards them without converting. JSON floats
that are not finite (a failing report's inf error) are sent as the strings "Infinity",
"-Infinity" and "NaN": JSON itself has no such numbers and JSON.parse refuses them.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

import numpy as np

from ... import base64_tensors
from ...config import HOST_INPUTS, AttentionConfig, ConfigError, check_input_bytes, validate
from ...gpu.device import REQUIRED_LIMITS
from ...kernels import DEFAULT_VARIANT, VARIANTS
from ...reference_cost import check_reference_cost
from ..judge.cases import CASES, SMOKE, Case, by_id
from ..judge.compare import BaselineOverflow
from ..judge.inputs import judge_case, make_inputs
from ..judge.limitations import Coverage, case_coverage, coverage
from ..judge.report import outcome, run_status
from ..judge.verdict import judge_outputs
from ..wire import decode_outputs, encode_tensors
from .limits import Limits
from .policy import METHODS

JSON_TYPE = "application/json"


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def handle(method: str, path: str, query: str, body: bytes, *, limits: Limits) -> tuple[int, bytes]:
    """One request -> (HTTP status, JSON body). Refusals are 4xx with {"error"}; anything else
    raised is a harness bug, which the server logs and answers 500."""
    routes = {
        "/api/info": lambda: info(limits),
        "/api/cases": lambda: cases(**_one_each(query, "set", "variant", "adapter")),
        "/api/inputs": lambda: inputs(**_one_each(query, "case")),
        "/api/judge": lambda: judge(_body(body), limits),
        "/api/judge_case": lambda: judge_matrix_case(_body(body), limits),
    }
    try:
        if path not in routes:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no endpoint {path}; known: {', '.join(routes)}")
        want, action = METHODS[path], routes[path]
        if method != want and not (method == "HEAD" and want == "GET"):
            raise ApiError(HTTPStatus.METHOD_NOT_ALLOWED, f"{path} takes {want}, not {method}")
        answer = action()
        return HTTPStatus.OK, answer if isinstance(answer, bytes) else _dumps(answer)
    except ApiError as exc:
        return exc.status, _dumps({"error": str(exc)})
    except ConfigError as exc:  # bad input from the page: say what, naming the argument
        return HTTPStatus.BAD_REQUEST, _dumps({"error": str(exc)})


def info(limits: Limits) -> dict[str, Any]:
    return {
        "max_body_bytes": limits.max_body,
        # What reference_cost.check_reference_cost takes: the page's form refuses the same cases.
        "reference_limits": limits.reference(),
        "required_limits": REQUIRED_LIMITS,
        "variants": {
            name: {"description": v.description, "required_limits": v.required_limits}
            for name, v in VARIANTS.items()
        },
        "default_variant": DEFAULT_VARIANT,
    }


def cases(set: str = "smoke", variant: str = "", adapter: str = "") -> dict[str, Any]:
    """The smoke cases or the whole matrix (long cases included); with a variant, each case
    says whether a declared limitation covers it on `adapter` (the page's adapter name)."""
    if set not in ("smoke", "all"):
        raise ApiError(HTTPStatus.BAD_REQUEST, f"set: must be smoke or all, got {set!r}")
    if variant and variant not in VARIANTS:
        raise ConfigError("variant", f"unknown {variant!r}; known: {', '.join(VARIANTS)}")
    chosen = SMOKE if set == "smoke" else CASES
    return {
        "set": set,
        "cases": [
            {
                "id": c.id,
                "config": c.config().to_dict(),
                "mask": c.mask,
                "backward_runs": 2 if c.repeat_backward else 1,
                "check_dropout_fraction": c.check_dropout_fraction,
                "long": c.long,
                "covered": _covered(case_coverage(variant, adapter, c)) if variant else None,
            }
            for c in chosen
        ],
    }


def inputs(case: str = "") -> bytes:
    """A matrix case's inputs as the answer's JSON bytes: made once per case and shared by
    every request for it (a long case's answer is 89 MB), one case made at a time."""
    return _inputs_answer(_case(case))


_INPUTS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _inputs_answer_once(case: Case) -> bytes:
    x = make_inputs(case)
    answer = {"case": case.id, "config": case.config().to_dict(), "tensors": encode_tensors(x)}
    return _dumps(answer)


def _inputs_answer(case: Case) -> bytes:
    with _INPUTS_LOCK:
        return _inputs_answer_once(case)


def judge(request: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """Judge the page's outputs for the page's inputs; also return the reference (as f32)."""
    cfg = AttentionConfig.from_dict(_field(request, "config", dict))
    validate(cfg)
    _affordable(cfg, limits)
    variant = _variant(request)
    adapter = _field(request, "adapter", str, "")
    encoded_inputs = _tensors(request, "inputs")
    encoded_outputs = _tensors(request, "outputs")
    unknown = set(encoded_inputs) - set(HOST_INPUTS)
    if unknown:
        raise ConfigError(sorted(unknown)[0], f"unknown input (known: {', '.join(HOST_INPUTS)})")
    raw = {}
    for name, data in encoded_inputs.items():
        raw[name] = base64_tensors.decode(name, data)
    check_input_bytes(cfg, raw)
    if "d_out" not in raw:
        raise ConfigError("d_out", "is missing (the backward pass needs it)")
    shapes = _shapes(cfg)
    x = {n: np.frombuffer(b, "<f4").reshape(shapes[n]) for n, b in raw.items()}
    got = decode_outputs(cfg, encoded_outputs)
    if "o" not in got:
        raise ConfigError("o", "is missing from the outputs")
    t0 = time.perf_counter()
    bounds: dict[str, np.ndarray] = {}
    try:
        reports, ref64 = judge_outputs(cfg, x, got, bounds=bounds)
    except BaselineOverflow as exc:
        raise ApiError(HTTPStatus.UNPROCESSABLE_ENTITY, f"inputs: {exc}") from None
    reference_ms = (time.perf_counter() - t0) * 1e3
    passed = bool(reports) and all(r.passed for r in reports)
    covered = coverage(variant, adapter, cfg)
    return {
        "passed": passed,
        # pass, fail, known (a declared flaw of the variant covers this failure) or
        # unsupported (a declared limitation of the page's driver covers the run)
        "status": run_status(passed, covered),
        "covered": _covered(covered),
        "reports": [r.to_json() for r in reports],
        # For the page's maps, as f32: the reference, and |actual - ref64| taken in float64
        # (differencing against a reference already rounded to f32 would add rounding of
        # the size of the errors themselves).
        "reference": encode_tensors({n: ref64[n].astype(np.float32) for n in got}),
        "abs_error": encode_tensors({n: _abs_error(got[n], ref64[n]) for n in got}),
        # each element's own bound (compare.element_bounds): the maps mark what exceeds it
        "bound": encode_tensors(bounds),
        "reference_ms": reference_ms,
    }


def judge_matrix_case(request: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """A matrix case run in the page, judged by judge.inputs.judge_case (as pytest judges it),
    from the page's run_case reply and the case's own inputs."""
    case = _case(_field(request, "case", str))
    _affordable(case.config(), limits)
    reply = _field(request, "reply", dict)
    if not isinstance(reply.get("outputs"), dict):
        raise ConfigError("reply", "must be run_case's reply object (with outputs)")
    variant = _variant(request)
    runtime = _field(request, "runtime", str, "browser")
    adapter = _field(request, "adapter", str, "")
    arrays = decode_outputs(case.config(), _tensors(reply, "outputs"))
    if "o" not in arrays:
        raise ConfigError("reply.outputs.o", "is missing")
    _reply_extras(reply)
    x = make_inputs(case)
    result = judge_case(case, x, dict(reply, arrays=arrays), runtime=runtime, variant=variant)
    covered = case_coverage(variant, adapter, case)
    out = result.to_json()
    out["status"] = outcome([result], covered).status
    out["covered"] = _covered(covered)
    return out


def _reply_extras(reply: dict[str, Any]) -> None:
    """What judge_case reads from a run_case reply besides its outputs, as run_case writes
    it: timings_ms an object of numbers, backward_digests an array of hex strings."""
    timings = reply.get("timings_ms", {})
    if not isinstance(timings, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in timings.values()
    ):
        raise ConfigError("reply.timings_ms", "must be an object of numbers (milliseconds)")
    digests = reply.get("backward_digests", [])
    if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
        raise ConfigError("reply.backward_digests", "must be an array of sha256 hex strings")


def _affordable(cfg: AttentionConfig, limits: Limits) -> None:
    """Refuse, before any array work, a case whose reference would cost more than the
    server allows: the cost follows the declared shape, not the body's size."""
    try:
        check_reference_cost(cfg, limits.reference())
    except ConfigError as exc:
        raise ApiError(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc)) from None


def _field(request: dict[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    """request[name], which must be a `kind` (JSON's object, string, ...)."""
    if name not in request:
        if default is ...:
            raise ConfigError(name, "is missing")
        return default
    value = request[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        want = {dict: "an object", str: "a string", list: "an array"}.get(kind, kind.__name__)
        raise ConfigError(name, f"must be {want}, got {type(value).__name__}")
    return value


def _tensors(request: dict[str, Any], name: str) -> dict[str, str]:
    """request[name]: an object of base64 strings."""
    tensors = _field(request, name, dict)
    for key, value in tensors.items():
        if not isinstance(value, str):
            raise ConfigError(
                f"{name}.{key}", f"must be a base64 string, got {type(value).__name__}"
            )
    return tensors


def _variant(request: dict[str, Any]) -> str:
    variant = _field(request, "variant", str, DEFAULT_VARIANT)
    if variant not in VARIANTS:
        raise ConfigError("variant", f"unknown {variant!r}; known: {', '.join(VARIANTS)}")
    return variant


def _covered(covered: Coverage | None) -> dict[str, str] | None:
    """A declared limitation's coverage as the page shows it."""
    if covered is None:
        return None
    lim = covered.limitation
    return {
        "status": covered.status,
        "limitation": lim.name,
        "reason": covered.reason,
        "cause": lim.cause,
        "text": str(covered),
    }


def _one_each(query: str, *names: str) -> dict[str, str]:
    """The query's parameters among `names`, each given at most once."""
    try:
        got = parse_qs(query, errors="strict", max_num_fields=len(names))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"query: {exc}") from None
    unknown = set(got) - set(names)
    if unknown:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"unknown parameter {sorted(unknown)[0]!r}")
    for name, values in got.items():
        if len(values) > 1:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"parameter {name!r} given {len(values)} times")
    return {n: v[0] for n, v in got.items()}


def _case(case_id: str) -> Case:
    if not case_id:
        raise ApiError(HTTPStatus.BAD_REQUEST, "case: missing (a matrix case id)")
    try:
        case = by_id(case_id)
    except ValueError as exc:
        raise ApiError(HTTPStatus.NOT_FOUND, str(exc)) from None
    if case not in CASES:  # an ad-hoc id's sizes are the caller's: /api/inputs checks no cost
        raise ApiError(HTTPStatus.NOT_FOUND, f"no case {case_id!r} in the matrix")
    return case


def _shapes(cfg: AttentionConfig) -> dict[str, tuple[int, ...]]:
    return cfg.shapes() | {"mask": cfg.mask_shape or (0,), "alibi_slopes": cfg.alibi_shape or (0,)}


def _abs_error(actual: np.ndarray, ref: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(actual.astype(np.float64) - ref).astype(np.float32)


# JSON objects and arrays a body may hold: a request is a few objects of base64 strings, and
# each empty {} costs the parser some 100 bytes of Python objects (a 63 MiB body of them
# took 1.7 GB to refuse).
MAX_JSON_CONTAINERS = 10_000


def _body(body: bytes) -> dict[str, Any]:
    containers = body.count(b"{") + body.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise ApiError(
            HTTPStatus.BAD_REQUEST,
            f"body: {containers} JSON objects or arrays, at most {MAX_JSON_CONTAINERS}",
        )
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, ints over 4300 digits
        raise ApiError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {exc}") from None
    except RecursionError:
        raise ApiError(HTTPStatus.BAD_REQUEST, "body: JSON nested too deeply") from None
    if not isinstance(request, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
    return request


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _dumps(obj: Any) -> bytes:
    return json.dumps(_finite(obj), allow_nan=False).encode()
