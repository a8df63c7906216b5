"""Serve the demo and harness pages: `python server.py [--port N]` (`--help` lists the
options). The server itself is py_harness/host/serving/server.py."""

import sys

from py_harness.host.serving.serve import main

if __name__ == "__main__":
    sys.exit(main())
