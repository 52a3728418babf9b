#!/usr/bin/env bash
# Set everything up and run the main job on the embedded default: a real Prometheus, the
# simulated vLLM fleet replaying a real production trace, and `vllm-scaler run` scaling it,
# beside the same slice replayed under KEDA.
# Extra arguments go to `vllm-scaler sim` (see `.venv/bin/vllm-scaler sim --help`).
#   scripts/demo.sh --update-docs   run it and put its summary, decisions and plot into the
#                                   README and docs/demo.md (after a change of the policy,
#                                   the capacity signal or the simulated replica)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = "--update-docs" ]; then
  shift
  .venv/bin/vllm-scaler sim --write-summary README.md --write-summary docs/demo.md "$@"
  cp out/demo/demo.png docs/demo.png
  exit 0
fi
exec .venv/bin/vllm-scaler sim "$@"
