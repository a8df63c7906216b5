"""What one request may cost the server: its body, its time to arrive, and the float64
reference it asks for (reference_cost.reference_cost models that from the declared shape).
server.py enforces the first two, api.py the third; /api/info sends them to the page."""

from __future__ import annotations

from dataclasses import dataclass

from ..judge import blocks

# The demo's judge request carries inputs and outputs as base64 (8 tensors of B*S*H*D f32):
# a body is read whole before its config can be checked, so this bounds what a request holds
# before the reference's cost is known. The page reads it from /api/info and refuses bigger.
DEFAULT_MAX_BODY = 64 * 2**20
DEFAULT_TIMEOUT = 10.0  # seconds for one request's head and body to arrive
# The float64 reference's modelled cost (reference_cost.reference_cost), see docs/serving.md.
DEFAULT_MAX_REFERENCE_MB = 512
DEFAULT_MAX_REFERENCE_SECONDS = 30.0


@dataclass
class Limits:
    """What one request may cost: body size, time to arrive, the reference's modelled cost."""

    max_body: int = DEFAULT_MAX_BODY
    timeout: float = DEFAULT_TIMEOUT
    max_reference_bytes: int = DEFAULT_MAX_REFERENCE_MB * 2**20
    max_reference_seconds: float = DEFAULT_MAX_REFERENCE_SECONDS

    def reference(self) -> dict[str, float]:
        """As /api/info sends them and reference_cost.check_reference_cost takes them."""
        return {
            "max_reference_bytes": self.max_reference_bytes,
            "max_reference_seconds": self.max_reference_seconds,
            # the judge's threads: each holds a block of scores (the model's memory)
            "judge_workers": blocks.worker_count(),
        }
