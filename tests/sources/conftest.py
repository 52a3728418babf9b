"""Fixtures of the Prometheus source tests (helpers live in ``fakeprom.py``)."""

from tests.support.fakeprom import fake_prom, http_client, make_source

__all__ = ["fake_prom", "http_client", "make_source"]
