"""Helm's engine (helm-python-sdk, the dev extra) for the scripts that render the chart
(``render-chart.py``, ``render-manifests.py``): imported from the project's ``.venv``, with
the Go engine's own log lines kept off the output."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from scriptkit import in_the_venv

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "vllm-scaler"
# Labels that say "installed by Helm": wrong on objects that kubectl applies.
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version")


try:
    import helm_python as helm
    import yaml
except ModuleNotFoundError:
    in_the_venv("helm-python-sdk and PyYAML (the dev extra)")

__all__ = ["CHART", "HELM_LABELS", "ROOT", "engine_log_dropped", "helm", "yaml"]


@contextlib.contextmanager
def engine_log_dropped() -> Iterator[None]:
    """Helm's Go engine logs on the process's stderr itself (``INFO found symbolic link in
    path`` for the chart's dashboards/ link), past ``helm.disable_logging()``, which only
    quiets the Python side: file descriptor 2 goes to a scratch file during the call. Its
    lines but its INFO ones are shown when the call fails, for whatever they tell."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            scratch.seek(0)
            lines = scratch.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.writelines(line for line in lines if " INFO " not in line)
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
