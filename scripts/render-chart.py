#!/usr/bin/env python3
"""Render the Helm chart without the helm command line, for `kubectl apply -f -`.

    scripts/render-chart.py [RELEASE] [CHART] [-n NAMESPACE] [--create-namespace]
        [-f VALUES.yaml ...] [--set K=V ...] [--set-string K=V ...] [--set-json K=JSON ...]
        [--set-file K=PATH ...] [--set-literal K=V ...] [--show-only TEMPLATE ...]
        [--include-crds]

takes the arguments of `helm template` (RELEASE defaults to vllm-scaler, CHART to the
clone's deploy/helm/vllm-scaler, a directory or a packaged .tgz) and prints what it prints:
every manifest after `---` and a `# Source:` line, in the order Helm installs kinds. The
values are Helm's own: the chart's values.schema.json checks them, Helm's parser reads each
--set expression, and they merge as Helm merges them (the -f files in order, then --set-json,
--set, --set-string, --set-file, --set-literal). --create-namespace adds the Namespace first,
as `helm install --create-namespace` creates it. --include-crds adds the chart's crds/ (the
VLLMAutoscaler CustomResourceDefinition) as `helm template --include-crds` does, before the
templates; without it they are left out, as `helm template` leaves them out (`helm install`
applies them by itself; kubectl needs them in the render, or deploy/base/crd.yaml applied
first). For example:

    scripts/render-chart.py vllm-scaler -n vllm-scaler --create-namespace --include-crds \\
        --set-file policy=my-policy.yaml \\
        --set prometheus.url=http://prometheus-operated.monitoring.svc:9090 \\
      | kubectl apply -f -

The engine is Helm's Go code (helm-python-sdk, the dev extra: ./scripts/setup.sh --dev); the
script runs itself again with the clone's .venv when started by another Python. kubectl
applies the objects but keeps no Helm release: upgrade by rendering and applying again
(`kubectl apply --prune` or `kubectl delete -f -` of the old render removes objects a new
render no longer has), or move to `helm install` later.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# the shared engine module beside this script (sys.path[0] is scripts/ when it runs)
from helm_engine import CHART, engine_log_dropped, helm, yaml

#: Helm's install order of kinds (helm.sh/helm/v3/pkg/releaseutil InstallOrder); other kinds
#: (the Prometheus Operator's) come after them.
INSTALL_ORDER = (
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    ").split(",
)

#: The value options in the order Helm merges them (pkg/cli/values Options.MergeValues),
#: each with its parser of one expression.
SET_OPTIONS = (
    ("set_json", "--set-json", helm.parse_set_json),
    ("set", "--set", helm.parse_set_string),
    ("set_string", "--set-string", helm.parse_set_string_values),
    ("set_file", "--set-file", helm.parse_set_file),
    ("set_literal", "--set-literal", helm.parse_set_literal),
)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` as Helm merges values: mappings key by key, anything
    else (a list, a scalar, null) replaced."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        out[key] = merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _values_file(name: str) -> dict[str, Any]:
    text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    loaded = yaml.safe_load(text)
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise SystemExit(f"render-chart.py: -f {name}: not a YAML mapping of values")
    return loaded


def user_values(args: argparse.Namespace) -> dict[str, Any]:
    """The values the options give, merged in Helm's order (the chart's defaults apart)."""
    values: dict[str, Any] = {}
    for name in args.values:
        values = merge(values, _values_file(name))
    for dest, flag, parse in SET_OPTIONS:
        for expression in getattr(args, dest):
            try:
                values = merge(values, parse(expression))
            except helm.HelmError as e:
                raise SystemExit(f"render-chart.py: {flag} {expression}: {e}") from None
    return values


def _order(doc: dict[str, Any]) -> int:
    kind = doc.get("kind")
    return INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)


def render(args: argparse.Namespace) -> str:
    """The manifests as ``helm template`` prints them."""
    chart_path = Path(args.chart)
    with engine_log_dropped():
        chart = (
            helm.Chart.load_archive(chart_path.read_bytes())
            if chart_path.is_file()
            else helm.Chart.load(chart_path)
        )
        with chart:
            out = chart.render(
                user_values(args), name=args.release, namespace=args.namespace, is_install=True
            )
            crds = chart.crds if args.include_crds else []
    chart_name = next(iter(out)).split("/", 1)[0] if out else chart_path.name
    wanted = {f"{chart_name}/{s.removeprefix(chart_name + '/')}" for s in args.show_only}
    # helm template --include-crds names each as chart/crds/FILE in its `# Source:` line
    crd_sources = {crd["filename"]: crd["data"] for crd in crds}
    missing = wanted - set(out) - set(crd_sources)
    if missing:
        raise SystemExit(f"render-chart.py: --show-only: no template {', '.join(sorted(missing))}")
    manifests: list[tuple[int, str, str]] = []
    for source, data in crd_sources.items():
        # Helm prints a CRD file as it is (comments and all), before every template
        if not wanted or source in wanted:
            manifests.append((-2, source, data.strip("\n") + "\n"))
    for source in sorted(out):
        if not source.endswith((".yaml", ".yml")) or (wanted and source not in wanted):
            continue
        # one document per manifest, split as Helm splits a template's output
        for text in out[source].split("\n---"):
            doc = yaml.safe_load(text)
            if isinstance(doc, dict) and doc:
                manifests.append((_order(doc), source, text.strip("\n-") + "\n"))
    if args.create_namespace and not wanted:
        namespace = yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.namespace}},
            sort_keys=False,
        )
        manifests.append((-3, "--create-namespace", namespace))
    manifests.sort(key=lambda m: m[0])  # stable: a kind's manifests keep their file order
    return "".join(f"---\n# Source: {source}\n{text}" for _, source, text in manifests)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="render-chart.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
    )
    p.add_argument("release", nargs="?", default="vllm-scaler", help="release name")
    p.add_argument("chart", nargs="?", default=str(CHART), help="chart directory or .tgz")
    p.add_argument("-n", "--namespace", default="default", help="the release's namespace")
    p.add_argument("--create-namespace", action="store_true", help="add the Namespace")
    p.add_argument(
        "-f", "--values", action="append", default=[], metavar="FILE", help="values file, - stdin"
    )
    for dest, flag, _ in SET_OPTIONS:
        p.add_argument(flag, dest=dest, action="append", default=[], metavar="K=V")
    p.add_argument(
        "-s",
        "--show-only",
        action="append",
        default=[],
        metavar="TEMPLATE",
        help="only this template (templates/rbac.yaml)",
    )
    p.add_argument(
        "--include-crds",
        action="store_true",
        help="add the chart's crds/ (the VLLMAutoscaler CRD), as helm template --include-crds",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    helm.disable_logging()
    try:
        helm.validate_release_name(args.release)
        text = render(args)
    except helm.HelmError as e:
        print(f"render-chart.py: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
