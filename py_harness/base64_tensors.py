"""Tensor bytes as base64 text: how a JSON document carries a tensor where no side channel
does (a runtime without blobs, the demo page's API). One encoder and one decoder for every
side (the service in a page or worker, the host's wire, the server), so a string that is
not base64 is refused in the same words wherever it arrives."""

from __future__ import annotations

import base64
import binascii

from .config import ConfigError


def encode(data: bytes | bytearray | memoryview) -> str:
    """The standard alphabet, padded: what JavaScript's atob and Python both read."""
    return base64.b64encode(data).decode("ascii")


def decode(name: str, text: object) -> bytes:
    """The bytes of tensor `name`; text that is not a base64 string is refused naming it."""
    if not isinstance(text, str | bytes):
        raise ConfigError(name, f"must be a base64 string, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(name, "is not base64") from None
