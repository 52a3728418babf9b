#!/usr/bin/env bash
# Prepare a Debian/Ubuntu machine for vllm-scaler: Python 3.11+ virtual environment in .venv
# with the package installed, and Debian's `prometheus` package when it is missing.
# Usage: scripts/setup.sh [--dev]     (--dev also installs the test tools and Debian's
#                                      `victoria-metrics`, the tests' second backend)
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${_APT_UPDATED:-}" ]; then
    as_root apt-get update -q >/dev/null
    _APT_UPDATED=1
  fi
  as_root apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  # stderr silenced: a pyenv shim of a version that is not installed complains here.
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "setup: Python 3.11 or newer is required (found: $(python3 --version 2>&1 || echo none))" >&2
  exit 1
fi

if ! command -v prometheus >/dev/null 2>&1 && [ ! -x /usr/bin/prometheus ]; then
  echo "setup: installing Debian's prometheus package"
  apt_install prometheus
fi

if [ "${1:-}" = "--dev" ] && ! command -v victoria-metrics >/dev/null 2>&1 &&
   [ ! -x /usr/bin/victoria-metrics ]; then
  echo "setup: installing Debian's victoria-metrics package"
  apt_install victoria-metrics
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating the virtual environment .venv with $python"
  if ! "$python" -m venv .venv 2>/dev/null; then
    # Debian and Ubuntu ship venv separately.
    rm -rf .venv
    apt_install "python3-venv" || apt_install "$(basename "$python")-venv"
    "$python" -m venv .venv
  fi
fi

extra=sim
if [ "${1:-}" = "--dev" ]; then extra=dev; fi
# The extras an install of $extra brings: dev includes sim (pyproject.toml: dev =
# vllm-scaler[sim,...]), so that demo.sh (sim) after setup.sh --dev (or test.sh) does not
# reinstall, nor test.sh after it unless dev is missing.
case "$extra" in
  dev) provides="dev sim" ;;
  *) provides="$extra" ;;
esac
# The editable install follows source edits by itself; it needs redoing only when the
# package's metadata or dependencies change, so a stamp of those (and of the extras
# installed) skips a reinstall (about 20 s) in the edit-test loop. A fresh clone (CI) has no
# .venv, hence no stamp.
stamp=.venv/.vllm-scaler-setup
digest="$(cat pyproject.toml requirements.txt 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && read -r stamp_digest stamp_extras < "$stamp" &&
   [ "$stamp_digest" = "$digest" ] && [[ " $stamp_extras " == *" $extra "* ]] &&
   .venv/bin/python -c 'import importlib.metadata as m; m.version("vllm-scaler")' 2>/dev/null; then
  exit 0
fi
# one line per step: the installs take minutes on a fresh machine, quietly otherwise
echo "setup: upgrading pip in .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
echo "setup: installing vllm-scaler[${extra}] and its dependencies into .venv (pip; minutes on a fresh machine)"
.venv/bin/python -m pip install -q -e ".[${extra}]"
echo "$digest $provides" > "$stamp"
echo "setup: done (.venv/bin/vllm-scaler; this is skipped until pyproject.toml or requirements.txt change)"
