"""Fixtures for every test.

Each test starts from the secrets registered before it (at import, or by the fixtures of a
wider scope) and its own registrations end with it: :mod:`scaler.config.secrets` keeps one
registry per process, as a command's lifetime needs, and across a whole test run a secret one
test registered would mask the same text in another test's exact expected output.
"""

from __future__ import annotations

import pytest

from scaler.config import secrets


@pytest.fixture(autouse=True)
def _secrets_registered_by_this_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the registry's module state, copied: the registering functions rebind or update it
    monkeypatch.setattr(secrets, "_forms", set(secrets._forms))
    for name in ("_pattern", "_by_first", "_longest"):
        monkeypatch.setattr(secrets, name, getattr(secrets, name))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The end-to-end tests on Prometheus 3 run after the others (see
    :func:`tests.support.prometheus_versions.last_the_built_ones`)."""
    from tests.support.prometheus_versions import last_the_built_ones

    last_the_built_ones(items)
