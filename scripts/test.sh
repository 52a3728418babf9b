#!/usr/bin/env bash
# Set up (with the test tools) and run the whole test suite. Extra arguments go to pytest.
#   scripts/test.sh          everything (what CI runs)
#   scripts/test.sh --fast   the edit-test loop: without the end-to-end and slow tests
#                            (marked e2e / slow: real Prometheus runs, the simulated fleet,
#                            the soak, long runs)
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
for arg in "$@"; do
  if [ "$arg" = "--fast" ]; then
    args+=(-m "not e2e and not slow")
  else
    args+=("$arg")
  fi
done
scripts/setup.sh --dev
exec .venv/bin/python -m pytest "${args[@]}"
