#!/usr/bin/env bash
# Set up (with the test tools) and run the whole test suite. Extra arguments go to pytest.
#   scripts/test.sh          everything (what CI runs)
#   scripts/test.sh --fast   the edit-test loop: without the end-to-end, slow and cluster
#                            tests (marked e2e / slow / cluster: real Prometheus runs, the
#                            simulated fleet, the soak, long runs, the real control plane)
# The cluster tier (tests/cluster) runs against a Kubernetes control plane built from its Go
# modules, and the end-to-end tests run on Prometheus 3 (built from its module) beside
# Debian's (both cached under ~/.cache/vllm-scaler/bin). When they are not built yet, the
# builds run in the background while the other tests run (they use about one core, the builds
# the rest), and the tests that need them, run last, wait for them. Without Go those tests
# are skipped, except with CI=true, where that fails the run.
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
build_pid=""
build_log=.venv/test-servers-build.log
missing=()
if [ -z "$fast" ]; then
  for program in kubeplane prometheus; do  # the control plane first: its tests come first
    .venv/bin/python -m scaler.sim.controlplane path "$program" >/dev/null 2>&1 || missing+=("$program")
  done
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "test: building ${missing[*]} in the background (log: $build_log)"
  # its own process group, so that stopping it stops go build and its compilers too
  setsid .venv/bin/python -m scaler.sim.controlplane build "${missing[@]}" >"$build_log" 2>&1 &
  build_pid=$!
fi
stop_build() {
  if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
    kill -TERM -- "-$build_pid" 2>/dev/null || kill -TERM "$build_pid" 2>/dev/null || true
    wait "$build_pid" 2>/dev/null || true
  fi
}
trap stop_build EXIT
set +e
.venv/bin/python -m pytest "${args[@]}"
code=$?
set -e
if [ -n "$build_pid" ] && ! kill -0 "$build_pid" 2>/dev/null; then
  if ! wait "$build_pid"; then
    echo "test: the build of ${missing[*]} failed; $build_log:" >&2
    tail -20 "$build_log" >&2
  fi
fi
exit "$code"
