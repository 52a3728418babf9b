"""The Prometheus servers the end-to-end tests run against, as one parameter: Debian's
package (2.42) and Prometheus 3 built from its Go module (``PROMETHEUS3``: 3.16), so a module
whose Prometheus fixture takes ``params=PROMETHEUS_VERSIONS`` checks everything on both.

Prometheus 3 is built on first use (Go needed; cached outside the clone like the control
plane). Without it the tests of that version are skipped saying why, except under
``CI=true``, where that fails them: CI must check both. Their tests run after the others
(:func:`last_the_built_ones`), so a build started beside the run (``scripts/test.sh``) has
the rest of the suite's time to finish.
"""

from __future__ import annotations

import os

import pytest

from scaler.sim.controlplane import PROMETHEUS3, BuildError, GoNotFoundError, ensure_binary
from scaler.sim.prometheus_server import PrometheusNotInstalledError, find_prometheus_binary

__all__ = ["BUILT_ID", "PROMETHEUS_VERSIONS", "last_the_built_ones", "prometheus_binary"]

DEBIAN = "debian"
BUILT = "built"
#: The test id of the built one (``test_x[prometheus-3]``).
BUILT_ID = "prometheus-3"
PROMETHEUS_VERSIONS = [
    pytest.param(DEBIAN, id="prometheus-2"),
    pytest.param(BUILT, id=BUILT_ID),
]


def prometheus_binary(which: str) -> str:
    """The path of the binary ``which`` (a :data:`PROMETHEUS_VERSIONS` value) names; skips
    the test when it is not there (fails under ``CI=true``), saying why."""
    try:
        if which == DEBIAN:
            return find_prometheus_binary()
        return str(ensure_binary(PROMETHEUS3).path)
    except (PrometheusNotInstalledError, GoNotFoundError, BuildError) as err:
        reason = f"{'Debian' if which == DEBIAN else PROMETHEUS3.describes}: {err}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI checks both Prometheus versions: {reason}", pytrace=False)
        pytest.skip(reason)


def last_the_built_ones(items: list[pytest.Item]) -> None:
    """Move the tests on the built Prometheus after the others, keeping each group's order."""
    built = [item for item in items if BUILT_ID in _param_id(item)]
    chosen = set(built)
    items[:] = [item for item in items if item not in chosen] + built


def _param_id(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    return "" if callspec is None else str(callspec.id)
