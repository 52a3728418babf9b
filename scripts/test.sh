#!/usr/bin/env bash
# Set up (with the test tools) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
exec .venv/bin/python -m pytest "$@"
