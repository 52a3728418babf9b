"""``python -m scaler.sim.controlplane build|up``: the test control plane for a person.

``build`` builds (or finds in the cache) the binaries and prints their paths; ``path`` prints
a cached one's path (exit 1 when not built); ``up`` starts a
control plane in the foreground, prints the admin kubeconfig's path and stays until SIGINT
or SIGTERM, then stops every server it started (``scripts/kube.sh up|down`` runs it in the
background).
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from scaler.sim.controlplane.build import (
    PROGRAMS,
    BuildError,
    BuildResult,
    GoNotFoundError,
    binary_path,
    ensure_binary,
)
from scaler.sim.controlplane.plane import ControlPlane

app = typer.Typer(add_completion=False, help=__doc__, no_args_is_help=True)


@app.command()
def build(
    names: Annotated[
        list[str] | None,
        typer.Argument(help=f"what to build: {', '.join(PROGRAMS)} (default: kubeplane)"),
    ] = None,
) -> None:
    """Build the binaries (or find them in the cache); print each one's path."""
    for name in names or ["kubeplane"]:
        program = PROGRAMS.get(name)
        if program is None:
            typer.echo(f"unknown program {name!r}: expected one of {', '.join(PROGRAMS)}", err=True)
            raise typer.Exit(2)
        try:
            result = ensure_binary(program)
        except (GoNotFoundError, BuildError) as err:
            typer.echo(str(err), err=True)
            raise typer.Exit(1) from None
        typer.echo(f"{program.name} {program.version}: {result.path} ({describe_build(result)})")


def describe_build(result: BuildResult) -> str:
    """How the binary came to be, for ``build``'s line: ``built now in 21 s``, or ``cached
    binary, built earlier in 21 s`` (the time recorded with it; ``build time unknown`` for
    a binary cached without one)."""
    took = f"in {result.seconds:.0f} s" if result.seconds is not None else None
    if result.built:
        return f"built now {took}" if took else "built now"
    return f"cached binary, built earlier {took}" if took else "cached binary, build time unknown"


@app.command()
def path(
    name: Annotated[str, typer.Argument(help=f"one of {', '.join(PROGRAMS)}")] = "kubeplane",
) -> None:
    """Print the cached binary's path; exit 1 when it is not built (nothing is built)."""
    program = PROGRAMS.get(name)
    if program is None:
        typer.echo(f"unknown program {name!r}: expected one of {', '.join(PROGRAMS)}", err=True)
        raise typer.Exit(2)
    found = binary_path(program)
    if not found.is_file():
        typer.echo(f"{program.name} {program.version} is not built ({found})", err=True)
        raise typer.Exit(1)
    typer.echo(str(found))


@app.command()
def up(
    workdir: Annotated[
        Path | None, typer.Option(help="folder of the files and logs (default: a new one)")
    ] = None,
    nodes: Annotated[int, typer.Option(min=1, help="kwok nodes")] = 2,
    ready_delay_seconds: Annotated[
        float, typer.Option(min=0, help="a pod's time from scheduled to Ready (model load)")
    ] = 3.0,
) -> None:
    """Start a control plane and keep it until SIGINT/SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    plane = ControlPlane(
        workdir, nodes=nodes, ready_delay_seconds=ready_delay_seconds, keep=workdir is not None
    )
    try:
        plane.start()
        assert plane.start_seconds is not None
        typer.echo(f"control plane up in {plane.start_seconds:.1f} s: {plane.server}")
        typer.echo(f"export KUBECONFIG={plane.admin_kubeconfig}")
        (plane.root / "ready").write_text(str(plane.admin_kubeconfig), encoding="utf-8")
        sys.stdout.flush()
        stop.wait()
    finally:
        plane.stop()
        typer.echo("control plane stopped")


if __name__ == "__main__":
    app()
