"""The mask that replaces a secret wherever text could be printed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

MASK: Final = "***"


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret value replaced by the mask."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
