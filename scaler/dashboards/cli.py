"""``vllm-scaler dashboards``: write the dashboards' JSON, check it, draw previews."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from scaler.dashboards.build import build_dashboards, to_json, write_dashboards
from scaler.dashboards.previews import render_previews


def main(argv: Sequence[str] | None = None) -> int:
    """``vllm-scaler dashboards``: write the dashboards' JSON (and, optionally, previews).

    Options: ``--out DIR`` (default ``dashboards``); ``--check`` exits 1 if the files in DIR
    differ from the code; ``--previews DIR --prometheus-url URL [--minutes N]`` draws PNGs.
    """
    parser = argparse.ArgumentParser(
        prog="vllm-scaler dashboards", description="Generate the Grafana dashboards."
    )
    parser.add_argument("--out", type=Path, default=Path("dashboards"), help="output folder")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the committed JSON is out of date"
    )
    parser.add_argument("--previews", type=Path, help="also draw PNG previews into this folder")
    parser.add_argument("--prometheus-url", default="http://localhost:9090")
    parser.add_argument("--minutes", type=float, default=10.0, help="preview time range")
    args = parser.parse_args(argv)
    if args.check:
        stale = [
            n
            for n, doc in build_dashboards().items()
            if not (args.out / n).is_file()
            or (args.out / n).read_text(encoding="utf-8") != to_json(doc)
        ]
        for n in stale:
            print(f"out of date: {args.out / n} (run: vllm-scaler dashboards --out {args.out})")
        return 1 if stale else 0
    for path in write_dashboards(args.out):
        print(path)
    if args.previews is not None:
        end = time.time()
        for path in render_previews(
            args.prometheus_url, args.previews, start=end - args.minutes * 60, end=end
        ):
            print(path)
    return 0
