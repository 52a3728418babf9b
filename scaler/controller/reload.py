"""The policy file, re-read when it changes: a running controller follows its configuration.

A ConfigMap mounted as a volume is updated in place by the kubelet (an atomic swap of the
files, within a minute of the change); ``kubectl edit``, a GitOps sync of the ConfigMap alone
or a Helm upgrade without a pod-template checksum change it without restarting the pod. A
controller that read its policy once keeps deciding with the old one, and nothing says so
(kedacore/keda#5915: a scaler kept its old settings until it was restarted).

:class:`PolicyWatcher` looks at the file before each cycle (its status, and its bytes only
when the status changed): a valid new policy replaces the running one at once (the
stabilization history of the targets that stay is kept, the state and the metrics of the
targets that left are dropped); an invalid one is refused with the same message as at start
(file, field, value, what was expected) and the running policy stays, until the file is fixed.
``vllm_scaler_policy_last_reload_successful`` says which (Prometheus' own
``prometheus_config_last_reload_successful``, for the same alert).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from scaler.config.policy import Policy, PolicyError, load_policy

__all__ = ["PolicyChange", "PolicyWatcher"]

log = structlog.get_logger("vllm_scaler")


@dataclass(frozen=True, slots=True)
class PolicyChange:
    """A new policy that a changed file holds, with what changed.

    Attributes:
        policy: the new policy (valid).
        added: target keys it adds.
        removed: target keys it drops.
        changed: target keys whose settings differ.
    """

    policy: Policy
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]


class PolicyWatcher:
    """Re-reads the policy file when it changes (see the module docstring).

    Args:
        path: the policy file.
        policy: the policy running now (read from ``path`` at start).
        on_result: called with True after a policy was replaced, False after a changed file
            was refused (the metric).
        resources: the VLLMAutoscaler resources are scaled too: a file of no target is valid.
    """

    def __init__(
        self,
        path: Path,
        policy: Policy,
        *,
        on_result: Callable[[bool], None] | None = None,
        resources: bool = False,
    ) -> None:
        self.path = path
        self.resources = resources
        self.policy = policy
        self._on_result = on_result
        self._stat = self._status()
        self._digest = self._read_digest()

    def _status(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)  # follows the ConfigMap's ..data symlink
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _read_digest(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    def check(self) -> PolicyChange | None:
        """The new policy when the file changed to a valid one (it becomes :attr:`policy`);
        None when it did not change, or changed to something invalid (logged once per
        content, the running policy kept)."""
        status = self._status()
        if status == self._stat:
            return None
        self._stat = status
        digest = self._read_digest()
        if digest == self._digest:
            return None  # touched, or swapped for the same bytes
        self._digest = digest
        try:
            new = load_policy(self.path, resources=self.resources)
        except PolicyError as err:
            log.error(
                "policy_reload_failed",
                file=str(self.path),
                error=str(err),
                message="the changed policy file is refused; the running policy stays until "
                "the file is valid",
                targets=[t.key for t in self.policy.targets],
            )
            if self._on_result is not None:
                self._on_result(False)
            return None
        old = {t.key: t for t in self.policy.targets}
        now = {t.key: t for t in new.targets}
        change = PolicyChange(
            new,
            added=tuple(k for k in now if k not in old),
            removed=tuple(k for k in old if k not in now),
            changed=tuple(k for k in now if k in old and now[k] != old[k]),
        )
        self.policy = new
        log.info(
            "policy_reloaded",
            file=str(self.path),
            added=list(change.added),
            removed=list(change.removed),
            changed=list(change.changed),
            rate_window_seconds=new.rate_window_seconds,
        )
        if self._on_result is not None:
            self._on_result(True)
        return change
