"""The words every layer shares: the names of the signals vllm-scaler scales on, and the
shape of a Kubernetes name.

The lowest layer, so that the policy (:mod:`scaler.config.policy`), the decision core, the
sources and the telemetry all speak of the same signals without importing each other. The
signals themselves, with everything each layer needs to know of them, are the registry of
:mod:`scaler.config.signal_specs`; :class:`SignalName` is re-exported here.
"""

from __future__ import annotations

from scaler.config.signal_specs import SignalName

__all__ = ["DNS_LABEL", "DNS_SUBDOMAIN", "SignalName"]

#: A DNS label (RFC 1123), as a namespace's name: at most 63 characters (checked apart).
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: A DNS subdomain (RFC 1123), as most objects' names (a Deployment's, a Lease's): dot-separated
#: DNS labels, at most 253 characters (checked apart).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
