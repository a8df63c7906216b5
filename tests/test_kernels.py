"""The case matrix on each runtime: O, LSE, dQ, dK, dV judged against float64 NumPy, through
the harness's pytest plugin exactly as a project with its own kernels uses it.

One test per case, variant and runtime, e.g.
`test_case[chromium-seed-d59-sq113-sk203-gqa6x2-causal]`. `-m smoke` runs the fast subset;
`--variant` and `--runtime` choose what is judged; `--draws N` judges each case on N input
draws; `--long` adds the GPU-sized cases. What a declared driver limitation covers is
skipped as unsupported; a declared kernel flaw's failure is an expected failure
(py_harness/host/judge/limitations.py); a stale declaration fails test_limitation.
"""

import pytest

# The matrix's tests are the ones `py-harness check` runs, imported as a project would
# import them: one definition of each.
from py_harness.host.matrix_suite import test_case, test_limitation

pytestmark = pytest.mark.browser  # a module's mark is its own: the suite's does not come along
__all__ = ["test_case", "test_limitation"]
