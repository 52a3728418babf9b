#!/usr/bin/env bash
# Regenerate requirements.txt, the image's lock: the runtime dependencies of pyproject.toml
# ([project.dependencies], no extras), each pinned with the hashes of its files on PyPI, for
# every platform the image is built for (Python 3.11+). Extra arguments go to uv, for example
# --upgrade or --upgrade-package httpx. Needs uv (in the dev extra).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
[ -x "$uv" ] || uv=uv
exec "$uv" pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
  --custom-compile-command scripts/lock.sh --output-file requirements.txt "$@"
