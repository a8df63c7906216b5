"""Command line: `python -m py_harness check|stability|bench|ablate [...]` (host only).

check needs the dev packages; bench needs only numpy and wgpu (torch optional).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m py_harness check|stability|bench|ablate [--help for its options]")
        return 0 if argv else 2
    if argv[0] == "check":
        from .host.check import main as check_main

        return check_main(argv[1:])
    if argv[0] == "stability":
        from .host.stability import main as stability_main

        return stability_main(argv[1:])
    if argv[0] == "bench":
        from .host.bench import main as bench_main

        return bench_main(argv[1:])
    if argv[0] == "ablate":
        from .host.ablate import main as ablate_main

        return ablate_main(argv[1:])
    print(f"unknown command {argv[0]!r}; known: check, stability, bench, ablate", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
