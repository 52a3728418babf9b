#!/usr/bin/env bash
# Set everything up and run the main job on the embedded default: a real Prometheus, the
# simulated vLLM fleet replaying a real production trace, and `vllm-scaler run` scaling it.
# Extra arguments go to `vllm-scaler sim` (see `.venv/bin/vllm-scaler sim --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/vllm-scaler sim "$@"
