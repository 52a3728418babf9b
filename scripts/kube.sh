#!/usr/bin/env bash
# The test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
# for a person; the cluster tests start their own.
#   scripts/kube.sh build [kubeplane|prometheus ...]   build the binaries into the cache
#                                                       (~/.cache/vllm-scaler/bin)
#   scripts/kube.sh up [--nodes N] [--ready-delay-seconds S]
#                                                       start one in the background; prints
#                                                       the KUBECONFIG to export
#   scripts/kube.sh down                                stop it
#   scripts/kube.sh state                               print its state directory
# The state (pid, kubeconfig, logs) is this user's and this clone's own:
# ${XDG_RUNTIME_DIR:-/tmp}/vllm-scaler-kube-<uid>-<hash of the clone's path>, so that another
# clone or user has its own plane ($VLLM_SCALER_KUBE_STATE names another directory).
set -euo pipefail
cd "$(dirname "$0")/.."
clone="$(pwd -P)"
key="$(id -u)-$(printf '%s' "$clone" | sha256sum | cut -c1-10)"
state="${VLLM_SCALER_KUBE_STATE:-${XDG_RUNTIME_DIR:-/tmp}/vllm-scaler-kube-$key}"
python=.venv/bin/python
cmd="${1:-}"
shift || true
case "$cmd" in
  build | up)
    [ -x "$python" ] || { scripts/setup.sh --dev; }
    ;;
esac
case "$cmd" in
  state)
    echo "$state"
    ;;
  build)
    exec "$python" -m scaler.sim.controlplane build "$@"
    ;;
  up)
    if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      echo "kube: already up for $clone (pid $(cat "$state/pid")): export KUBECONFIG=$state/admin.kubeconfig"
      exit 0
    fi
    "$python" -m scaler.sim.controlplane build kubeplane
    rm -rf "$state"
    mkdir -p "$state"
    nohup "$python" -m scaler.sim.controlplane up --workdir "$state" "$@" >"$state/up.log" 2>&1 &
    echo $! >"$state/pid"
    for _ in $(seq 1 600); do
      if [ -f "$state/ready" ]; then
        cat "$state/up.log"
        exit 0
      fi
      if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
        echo "kube: the control plane did not start; $state/up.log:" >&2
        tail -40 "$state/up.log" >&2
        exit 1
      fi
      sleep 0.5
    done
    echo "kube: not up after 5 minutes; see $state/up.log" >&2
    exit 1
    ;;
  down)
    if [ ! -f "$state/pid" ]; then
      echo "kube: not up"
      exit 0
    fi
    pid="$(cat "$state/pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    rm -f "$state/pid" "$state/ready"
    echo "kube: stopped (logs in $state)"
    ;;
  *)
    sed -n '2,13p' "$0" >&2
    exit 2
    ;;
esac
