"""`py-harness serve` (in a checkout also `python server.py`): the command line around the
page server (server.py).

Every option is checked by argparse (a usage error, exit 2, never a traceback); a port that
is taken is one line and exit 1; `--help` shows every default.
"""

from __future__ import annotations

import argparse
import sys

from ..arg_types import port, positive_number
from .limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_REFERENCE_MB,
    DEFAULT_MAX_REFERENCE_SECONDS,
    DEFAULT_TIMEOUT,
    Limits,
)
from .policy import LOOPBACK_NAMES
from .server import HarnessServer, base_url


def _ensure_built() -> bool:
    try:
        from ..dist.build_wheel import build
    except Exception as exc:  # any import failure gets the same advice
        print(f"server: cannot import the wheel builder: {exc!r}", file=sys.stderr)
        return False
    try:
        build()
    except Exception as exc:  # BuildError and tool failures alike
        print(f"server: could not build the py-harness wheel/lock:\n{exc}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="py-harness serve",
        description="Serve the demo page and the harness page (loopback only by default).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=port, default=8000, help="0 = any free port")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header name to accept besides 127.0.0.1, localhost, [::1] and --host",
    )
    parser.add_argument(
        "--timeout",
        type=positive_number,
        default=DEFAULT_TIMEOUT,
        help="seconds for a request to arrive (slower clients get 408 and are closed)",
    )
    parser.add_argument(
        "--max-body-mb",
        type=positive_number,
        default=DEFAULT_MAX_BODY / 2**20,
        help="largest POST body accepted by /api/ (MiB; larger gets 413)",
    )
    parser.add_argument(
        "--max-reference-mb",
        type=positive_number,
        default=DEFAULT_MAX_REFERENCE_MB,
        help="largest modelled memory of one judged case's float64 reference (MiB; 422 beyond)",
    )
    parser.add_argument(
        "--max-reference-seconds",
        type=positive_number,
        default=DEFAULT_MAX_REFERENCE_SECONDS,
        help="longest modelled time of one judged case's float64 reference (422 beyond)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.add_argument("--skip-build", action="store_true", help="serve build/dist/ as it is")
    args = parser.parse_args(argv)

    if not args.skip_build and not _ensure_built():
        print(
            "server: fetch Pyodide with `py-harness setup` (`npm ci` in a checkout), or pass "
            "--skip-build to serve without the wheel.",
            file=sys.stderr,
        )
        return 2
    if args.host not in LOOPBACK_NAMES:
        print(
            f"server: WARNING: binding {args.host} exposes the pages to the network, and "
            "navigator.gpu needs a secure context (open http://127.0.0.1 or localhost).",
            file=sys.stderr,
        )
    limits = Limits(
        int(args.max_body_mb * 2**20),
        args.timeout,
        int(args.max_reference_mb * 2**20),
        args.max_reference_seconds,
    )
    try:
        server = HarnessServer(
            (args.host, args.port), None, args.verbose, limits, tuple(args.allow_host)
        )
    except OSError as exc:
        print(
            f"server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    url = base_url(args.host, server.server_address[1])
    # A wildcard bind is not a URL a browser can use; point at loopback (a secure context).
    if args.host in ("0.0.0.0", "::", ""):
        url = base_url("127.0.0.1", server.server_address[1])
    print(f"Serving on {url}/  (demo page; test page: {url}/harness/harness.html)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
