"""Bugs planted in the kernels on purpose: the smoke suite must fail on every one.

A gradient harness is judged by the bugs it catches. Each mutant is one small source
edit of the kind that slips into real kernels; tests/test_planted_bugs.py runs the
smoke cases on each and requires a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..shaders import BACKWARD_FILE, FORWARD_FILE


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    occurrence: int = 1  # which occurrence of `old` in the file (1-based)

    def apply(self, sources: dict[str, str]) -> dict[str, str]:
        text = sources[self.file]
        at = -1
        for _ in range(self.occurrence):
            at = text.find(self.old, at + 1)
            if at < 0:
                raise ValueError(
                    f"{self.name}: {self.old!r} not found {self.occurrence}x in {self.file}"
                )
        return {**sources, self.file: text[:at] + self.new + text[at + len(self.old) :]}


MUTANTS: tuple[Mutant, ...] = (
    # missing softmax scale
    Mutant(
        "fwd-missing-scale", FORWARD_FILE, "fa2_ld4_q(q_off, c) * p.scale", "fa2_ld4_q(q_off, c)"
    ),
    Mutant("bwd-dq-missing-scale", BACKWARD_FILE, "- delta) * p.scale;", "- delta);"),
    Mutant("bwd-dk-missing-scale", BACKWARD_FILE, "- stats.x) * p.scale;", "- stats.x);"),
    # off-by-one at a mask edge
    Mutant(
        "fwd-causal-edge", FORWARD_FILE, "kj > qa) { return false; }", "kj >= qa) { return false; }"
    ),
    Mutant(
        "bwd-causal-edge",
        BACKWARD_FILE,
        "kj > qa) { return false; }",
        "kj > qa + 1u) { return false; }",
    ),
    Mutant("bwd-window-edge", BACKWARD_FILE, "if (dist >= p.window)", "if (dist > p.window)"),
    Mutant(
        "fwd-window-range",
        FORWARD_FILE,
        "begin = qa0 + 1u - p.window;",
        "begin = qa0 + 2u - p.window;",
    ),
    # wrong head mapping (GQA)
    Mutant(
        "fwd-gqa-head",
        FORWARD_FILE,
        "let kvh = h / (p.num_heads / p.num_kv_heads);",
        "let kvh = h % p.num_kv_heads;",
    ),
    Mutant(
        "bwd-gqa-head",
        BACKWARD_FILE,
        "let kvh = h / (p.num_heads / p.num_kv_heads);",
        "let kvh = h % p.num_kv_heads;",
    ),
    Mutant(
        "bwd-gqa-sum-one-head",
        BACKWARD_FILE,
        "for (var g = 0u; g < group; g++)",
        "for (var g = 0u; g < 1u; g++)",
    ),
    # dropout mask in one pass but not the other, or a different mask
    Mutant(
        "fwd-no-dropout",
        FORWARD_FILE,
        "let w = pj * dropout_scale(p.dropout_prob, p.seed, bh, qi, kj);",
        "let w = pj;",
    ),
    Mutant(
        "bwd-dkdv-no-dropout",
        BACKWARD_FILE,
        "let mij = dropout_scale(p.dropout_prob, p.seed, bh, qi, kj);",
        "let mij = 1.0;",
        occurrence=2,
    ),
    Mutant(
        "bwd-dq-dropout-transposed",
        BACKWARD_FILE,
        "dropout_scale(p.dropout_prob, p.seed, bh, qi, kj)",
        "dropout_scale(p.dropout_prob, p.seed, bh, kj, qi)",
    ),
    # other classic slips
    Mutant(
        "bwd-no-delta",
        BACKWARD_FILE,
        "delta4 = fma(do_reg[c], fab2_ld4_o(q_off, c), delta4);",
        "delta4 = delta4;",
    ),
    Mutant("fwd-lse-off", FORWARD_FILE, "lse = m + log(l);", "lse = m + log(l + 1.0e-3);"),
)
