"""`python -m py_harness COMMAND`: the same as the `py-harness` command (host/cli.py)."""

import sys

from .host.cli import main

if __name__ == "__main__":
    sys.exit(main())
