"""``vllm-scaler dashboards``: write the dashboards' JSON, check it, draw previews.

The command is registered on the main typer app (``scaler/cli.py``); the generator and the
previews are imported when it runs, so the command line works without the ``dashboards``
extra (the command then names it). ``--previews`` reads Prometheus with the same client
settings as every other command (``--prometheus-url``, token file, CA, client certificate,
headers, timeout).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaler.config.cli_options import (
    PROMETHEUS_FIELDS,
    OutputFormat,
    OutputOpt,
    fail,
    settings_options,
)
from scaler.config.options import output_dir_error
from scaler.config.settings import PrometheusSettings

if TYPE_CHECKING:
    import httpx

__all__ = ["main", "register"]


def dashboards(
    settings: PrometheusSettings,
    out: Annotated[Path, typer.Option(help="Folder the dashboards' JSON is written to.")] = Path(
        "dashboards"
    ),
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if the JSON in --out is stale.")
    ] = False,
    previews: Annotated[
        Path | None,
        typer.Option(help="Also draw PNG previews into this folder, from --prometheus-url."),
    ] = None,
    minutes: Annotated[float, typer.Option(help="Time range of the previews, minutes.")] = 10.0,
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """Generate the Grafana dashboards' JSON (and, with --previews, PNG previews)."""
    from scaler.dashboards.build import build_dashboards, to_json, write_dashboards

    as_json = output is OutputFormat.JSON
    if check:
        built = build_dashboards()
        stale = [
            str(out / n)
            for n, doc in built.items()
            if not (out / n).is_file() or (out / n).read_text(encoding="utf-8") != to_json(doc)
        ]
        missing = [p for p in stale if not Path(p).is_file()]
        run = f"(run: vllm-scaler dashboards --out {out})"
        if as_json:
            typer.echo(json.dumps({"out_of_date": stale, "missing": missing}))
        elif not out.is_dir():
            typer.echo(f"missing: folder {out} {run}")
        elif stale:
            for path in stale:
                typer.echo(f"{'missing' if path in missing else 'out of date'}: {path} {run}")
        else:
            typer.echo(f"up to date: {len(built)} dashboards in {out}")
        raise typer.Exit(1 if stale else 0)
    errors = [] if minutes > 0 else [f"--minutes: value {minutes:g}: expected a number > 0"]
    errors += [
        e
        for e in (
            output_dir_error("--out", out),
            None if previews is None else output_dir_error("--previews", previews),
        )
        if e is not None
    ]
    if errors:
        raise fail("\n".join(errors))
    written = [str(p) for p in write_dashboards(out)]
    pictures: list[str] = []
    if previews is not None:
        pictures = _previews(settings, previews, minutes)
    if as_json:
        typer.echo(json.dumps({"dashboards": written, "previews": pictures}))
    else:
        for path in written + pictures:
            typer.echo(path)


def _previews(settings: PrometheusSettings, folder: Path, minutes: float) -> list[str]:
    """Draw the previews with the client of ``settings``; a Prometheus that fails ends the
    command (exit 1) with one line saying why."""
    import httpx

    from scaler.dashboards.previews import render_previews
    from scaler.sources.prometheus import (
        AnswerError,
        TokenFileError,
        problem_line,
        request_problem,
        sync_client_for,
    )

    typer.echo(f"vllm-scaler: {settings.describe_prometheus()}", err=True)
    end = time.time()
    try:
        with sync_client_for(settings) as client:
            base = str(settings.prometheus_url).rstrip("/")
            if not _has_controller_series(client, base, minutes, end):
                typer.echo(
                    "vllm-scaler: warning: no vllm_scaler_* series in this Prometheus over the"
                    f" last {minutes:g} min: the decisions dashboard will show no data; they"
                    " come from the controller's /metrics (metrics_port, default 9100), which"
                    " Prometheus must scrape",
                    err=True,
                )
            return [
                str(p)
                for p in render_previews(
                    str(settings.prometheus_url).rstrip("/"),
                    folder,
                    start=end - minutes * 60,
                    end=end,
                    client=client,
                )
            ]
    except (AnswerError, httpx.HTTPError, TokenFileError) as err:
        # said as every command says it, the URL without its password (a token file that
        # became unreadable after the start: request not sent, naming the file, never the token)
        if isinstance(err, AnswerError):
            status, detail, code = err.status, err.detail, err.http_status
        else:
            status, detail = request_problem(err, settings.prometheus_timeout_seconds)
            code = None
        url = settings.prometheus_summary()["url"]
        line = problem_line(status, detail, code, str(url), settings.prometheus_auth)
        raise fail(f"previews: {line}", 1) from None
    except OSError as err:  # writing the pictures
        raise fail(f"previews: {err}", 1) from None


def _has_controller_series(client: httpx.Client, url: str, minutes: float, end: float) -> bool:
    """Whether the Prometheus at ``url`` holds any ``vllm_scaler_*`` series (the controller's
    own metrics) within the ``minutes`` before ``end`` (epoch seconds)."""
    expr = f'count(last_over_time({{__name__=~"vllm_scaler_.+"}}[{max(1, round(minutes * 60))}s]))'
    from scaler.dashboards.previews import query_result

    return bool(query_result(client, url, "query", {"query": expr, "time": end}))


def register(app: typer.Typer) -> None:
    """Add ``dashboards`` to the main typer app (``scaler/cli.py``)."""
    app.command("dashboards")(settings_options(PrometheusSettings, PROMETHEUS_FIELDS)(dashboards))


def main() -> None:
    """``python -m scaler.dashboards``: the ``dashboards`` command alone, printing through the
    same secret-masking streams as ``vllm-scaler``."""
    from scaler.config.cli_errors import CommandGroup
    from scaler.config.cli_options import register_environment_secrets
    from scaler.telemetry import redact

    redact.install()
    register_environment_secrets()
    app = typer.Typer(cls=CommandGroup, add_completion=False, pretty_exceptions_enable=False)
    register(app)
    app()
