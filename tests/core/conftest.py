from __future__ import annotations

import pytest

from scaler.config.policy import TargetPolicy
from tests.support.policies import case_target


@pytest.fixture
def policy() -> TargetPolicy:
    """The shared cases' default policy."""
    return case_target()
