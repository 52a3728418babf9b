"""Fixtures of the command-line tests (helpers live in ``tests/support``)."""

from tests.support.controller_harness import make_harness

__all__ = ["make_harness"]
