"""What the test session records about itself for tests to read (set in tests/conftest.py)."""

from __future__ import annotations

import pytest

SESSION_STARTED = pytest.StashKey[float]()
"""time.monotonic() when the session started."""
