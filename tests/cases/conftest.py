"""Fixtures of the case tests: the controller harness and the fake Prometheus (helpers live
in ``tests/support``)."""

from tests.support.controller_harness import make_harness
from tests.support.fakeprom import fake_prom, http_client, make_source

__all__ = ["fake_prom", "http_client", "make_harness", "make_source"]
