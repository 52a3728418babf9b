"""What a failed read of a target says, in the log (``target_read_failed``), on its resource's
status and in its ``FailedGetScale`` Event: what could not be read, of which target, from
which API server (its URL with the user-info masked, never a credential), why, what was
expected, and that the target is held.

The texts of the failure classes (:class:`~scaler.actuators.errors.ApiFailure`) say what the
controller needed for the read to succeed; :func:`read_failure_message` joins them.
"""

from __future__ import annotations

from typing import Final

from scaler.actuators.errors import ApiFailure, KubeApiError

__all__ = ["HELD", "READS", "read_failure_message"]

#: What each read of a target fetches, by the actuator call that fetches it.
READS: Final = {
    "scale": "the scale subresource and pods",
    "workload": "the workload object",
}

#: What the read needed, for each failure class.
_EXPECTED: Final = {
    ApiFailure.TRANSPORT: "an answer from the API server (is it up, and can the controller "
    "reach it: its address, a NetworkPolicy on the controller's egress, a proxy?)",
    ApiFailure.UNAUTHORIZED: "the controller's credentials to be accepted (an expired token, "
    "or a kubeconfig of another cluster)",
    ApiFailure.FORBIDDEN: "RBAC to allow the controller get on the workload and its scale "
    "subresource and list on pods in the target's namespace (the chart's rbac.scope)",
    ApiFailure.NOT_FOUND: "the workload to exist (the target's scaleTargetRef: apiVersion, "
    "kind and name)",
    ApiFailure.THROTTLED: "the API server to take the request (it asked to wait; the next "
    "cycle asks again)",
    ApiFailure.SERVER_ERROR: "an answer without a server error",
    ApiFailure.INVALID: "the API server to accept the request",
    ApiFailure.STALE: "the read to succeed",
}

#: What happens to a target whose read failed this cycle.
HELD: Final = (
    "is held: its replicas stay as they are and nothing is decided or written for it "
    "until a read succeeds"
)


def read_failure_message(
    target: str, read: str, error: KubeApiError, api_server: str | None
) -> str:
    """The one-line text of a failed read of ``target``.

    Args:
        target: the target's key (``ns/Kind/name``).
        read: what failed to be read, a key of :data:`READS`.
        error: the classified failure (its message holds no credential:
            :func:`~scaler.actuators.errors.classify_error`).
        api_server: the API server's URL, user-info masked
            (:class:`~scaler.actuators.api_client.ApiServerOrigin`); None where it is not
            known (a simulated cluster).

    Returns:
        ``cannot read the scale subresource and pods of llm/Deployment/vllm from the
        Kubernetes API server at https://10.0.0.1:6443: transport: cannot connect to
        10.0.0.1:6443: connection refused; expected an answer from the API server (...);
        llm/Deployment/vllm is held: ...``.
    """
    server = "the Kubernetes API server" + (f" at {api_server}" if api_server else "")
    return (
        f"cannot read {READS.get(read, read)} of {target} from {server}: "
        f"{error.outcome}: {error.message}; expected {_EXPECTED[error.outcome]}; "
        f"{target} {HELD}"
    )
