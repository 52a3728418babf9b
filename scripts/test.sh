#!/usr/bin/env bash
# Set up (with the test tools) and run the whole test suite. Extra arguments go to pytest.
#   scripts/test.sh          everything (what CI runs)
#   scripts/test.sh --fast   the edit-test loop: without the end-to-end, slow and cluster
#                            tests (marked e2e / slow / cluster: real Prometheus runs, the
#                            simulated fleet, the soak, long runs, the real control plane)
# The cluster tier (tests/cluster) runs against a Kubernetes control plane built from its Go
# modules: built here first (cached under ~/.cache/vllm-scaler/bin; the first build takes
# many minutes). Without Go it is skipped, except with CI=true, where that fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
fast=""
for arg in "$@"; do
  if [ "$arg" = "--fast" ]; then
    args+=(-m "not e2e and not slow and not cluster")
    fast=1
  else
    args+=("$arg")
  fi
done
scripts/setup.sh --dev
if [ -z "$fast" ]; then
  if ! .venv/bin/python -m scaler.sim.controlplane build kubeplane; then
    if [ "${CI:-}" = "true" ]; then
      echo "test: the cluster tier's control plane could not be built (see above)" >&2
      exit 1
    fi
    echo "test: the cluster tier will be skipped (the control plane could not be built)" >&2
  fi
fi
exec .venv/bin/python -m pytest "${args[@]}"
