"""argparse types shared by the tools: each refuses a bad value with the rule it broke, so
argparse names the option (and exits 2) before anything starts."""

from __future__ import annotations

import argparse


def natural(text: str) -> int:
    """An int >= 0 (numpy's generators take no negative seed)."""
    if not text.strip().isdecimal():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """An int >= 1."""
    if not text.strip().isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def positive_ints(text: str) -> list[int]:
    """Comma-separated ints >= 1 (sizes to sweep), at least one."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdecimal() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1, got {text!r}")
    return [int(p) for p in parts]


def naturals(text: str) -> list[int]:
    """Comma-separated ints >= 0, at least one (a variable-length batch's lengths)."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdecimal() for p in parts):
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 0, got {text!r}")
    return [int(p) for p in parts]


def positive_number(text: str) -> float:
    """A finite number > 0 (minutes, seconds)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def shard(text: str) -> tuple[int, int]:
    """K/N with 0 <= K < N."""
    k, _, n = text.partition("/")
    if not (k.isdecimal() and n.isdecimal() and int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"must be K/N with 0 <= K < N, got {text!r}")
    return int(k), int(n)


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    if not text.strip().isdecimal() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 65535], got {text!r}")
    return int(text)
