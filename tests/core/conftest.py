from __future__ import annotations

import pytest

from scaler.config.policy import TargetPolicy

from .builders import make_policy


@pytest.fixture
def policy() -> TargetPolicy:
    """The shared cases' default policy."""
    return make_policy()
