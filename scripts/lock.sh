#!/usr/bin/env bash
# Regenerate the image's two locks, each package pinned with the hashes of its files on PyPI,
# for every platform the image is built for (Python 3.11+):
#   requirements.txt        the runtime dependencies of pyproject.toml ([project.dependencies],
#                           no extras);
#   requirements-cloud.txt  the same with the cloud extra (managed Prometheus authentication:
#                           botocore, google-auth, azure-identity), for the image built with
#                           --build-arg LOCK=requirements-cloud.txt;
#   requirements-build.txt  the build backend ([build-system].requires), with which the image
#                           builds the project's wheel (--no-build-isolation).
# Extra arguments go to uv, for example --upgrade or --upgrade-package httpx. Needs uv (in the
# dev extra).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
[ -x "$uv" ] || uv=uv
python=.venv/bin/python
[ -x "$python" ] || python=python3
compile=("$uv" pip compile --universal --python-version 3.11 --generate-hashes
  --custom-compile-command scripts/lock.sh)
"${compile[@]}" pyproject.toml --output-file requirements.txt "$@"
"${compile[@]}" pyproject.toml --extra cloud --output-file requirements-cloud.txt "$@"
"$python" -c 'import sys, tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")' |
  "${compile[@]}" - --output-file requirements-build.txt "$@"
