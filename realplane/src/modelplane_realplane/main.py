"""``realplane``: build the real components, start and stop a real control plane on this machine.

uv run realplane build      # what is missing or out of date, nothing else
uv run realplane up         # the plane, with Modelplane installed by Crossplane
uv run realplane down       # stop everything `up` started
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import yaml

from modelplane_realplane import build as builder
from modelplane_realplane import fleet, install, reconcile, workload
from modelplane_realplane import plane as planes
from modelplane_realplane.paths import RUN


@click.group()
def cli() -> None:
    """Real Kubernetes and Crossplane, built from Go modules, judging Modelplane."""


@cli.command("build")
@click.argument("names", nargs=-1)
def build_command(names: tuple[str, ...]) -> None:
    """Build the named components (all by default) that are missing or out of date."""
    started = time.monotonic()
    try:
        outcomes = builder.build(list(names) or None)
    except builder.BuildError as error:
        raise click.ClickException(str(error)) from None
    built = [o.name for o in outcomes if o.built]
    click.echo(f"{len(built)} built, {len(outcomes) - len(built)} current, "
               f"{time.monotonic() - started:.0f} s")  # fmt: skip


@cli.command("up")
@click.option("--no-install", is_flag=True, help="Start the plane without installing Modelplane.")
def up_command(no_install: bool) -> None:
    """Start a real control plane and install Modelplane on it."""
    started = time.monotonic()
    try:
        builder.build()
        plane = planes.up(RUN, with_functions=not no_install)
        if not no_install:
            result = install.install(plane)
            if result.problems:
                raise click.ClickException("install incomplete:\n  " + "\n  ".join(result.problems))
    except (builder.BuildError, planes.processes.ComponentError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"up in {time.monotonic() - started:.0f} s; export KUBECONFIG={plane.kubeconfig}")
    click.echo(f"the workload cluster's kubeconfig: {plane.kubeconfig_of('workload-')}; "
               "`uv run realplane fleet examples/<name>` gives it an example's nodes")  # fmt: skip


@cli.command("fleet")
@click.argument("example", type=click.Path(exists=True, file_okay=False, path_type=Path))
def fleet_command(example: Path) -> None:
    """Give the workload cluster the nodes and devices EXAMPLE's adopted clusters have, and
    print the kubeconfig Secrets to apply in place of the example's placeholders."""
    plane = planes.Plane.load(RUN)
    if plane is None:
        raise click.ClickException("no plane is running: `uv run realplane up` first")
    fleets = reconcile.install_fleet(plane, example)
    for name, objects in fleets.items():
        click.echo(f"# {name}: {len(objects)} objects on the workload cluster", err=True)
    secrets = [d for d in fleet.read_manifests(example) if d.get("kind") == "Secret"
               and "kubeconfig" in (d.get("stringData") or {})]  # fmt: skip
    documents = [
        workload.kubeconfig_secret(plane, d["metadata"]["name"], d["metadata"]["namespace"])
        for d in secrets
    ]
    click.echo(yaml.safe_dump_all(documents, sort_keys=False))


@cli.command("down")
def down_command() -> None:
    """Stop every process `up` started."""
    left = planes.down(RUN)
    if left:
        raise click.ClickException(f"still running: {', '.join(left)}")
    click.echo("down")


@cli.command("status")
def status_command() -> None:
    """Which of the plane's processes are running, and where it listens."""
    plane = planes.Plane.load(RUN)
    if plane is None:
        click.echo("no plane")
        sys.exit(1)
    running = {name: planes.processes.alive(pid) for name, pid in plane.pids.items()}
    click.echo(json.dumps({"server": plane.server, "kubeconfig": str(plane.kubeconfig),
                           "running": running}, indent=2))  # fmt: skip
