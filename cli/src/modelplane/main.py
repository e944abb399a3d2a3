"""The ``modelplane`` command."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from modelplane import generate, repo


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="modelplane", prog_name="modelplane")
def cli() -> None:
    """Modelplane: render, validate and simulate compositions offline."""


@cli.command("generate")
@click.option("--check", is_flag=True, help="Fail if the committed models are stale.")
@click.option(
    "--crds",
    "crds_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="CRD directory (default: ../shared/crds beside the repository).",
)
def generate_command(check: bool, crds_dir: Path | None) -> None:
    """Generate Pydantic models from apis/ XRDs and the CRDs listed in schemas/crds.txt."""
    try:
        stale = generate.run(check=check, crds_dir=crds_dir or repo.shared_crds())
    except generate.GenerateError as err:
        raise click.ClickException(str(err)) from err
    if check and stale:
        click.echo("generated models are stale; run `uv run modelplane generate`:", err=True)
        for name in stale:
            click.echo(f"  {name}", err=True)
        sys.exit(1)
    click.echo("models are up to date" if not stale else f"regenerated {len(stale)} file(s)")


@cli.command("package")
@click.option(
    "--arch",
    "archs",
    default="amd64,arm64",
    show_default=True,
    help="Comma-separated architectures: amd64, arm64.",
)
@click.option(
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("_output"),
    show_default=True,
    help="Where functions/<name>-<arch>.tar are written.",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the downloaded Debian packages and base layers are kept, a week at most "
    "(default: MODELPLANE_CACHE_DIR, else ~/.cache/modelplane/package, shared by every clone).",
)
@click.option(
    "--function",
    "names",
    multiple=True,
    help="Build only this function (repeatable; default: every function).",
)
def package_command(archs: str, output: Path, cache: Path | None, names: tuple[str, ...]) -> None:
    """Build each function's runtime image tarball, without a Docker daemon (needs root)."""
    from modelplane import package  # noqa: PLC0415 - only this command needs it

    started = time.monotonic()
    try:
        chosen = [a.strip() for a in archs.split(",") if a.strip()]
        built = package.build(output, chosen, names, cache)
    except package.PackageError as err:
        raise click.ClickException(str(err)) from err
    for image in built:
        click.echo(
            f"{image.path}  {image.size / 1e6:.1f} MB  base {image.layers[0][7:19]}  "
            f"{image.seconds:.1f}s"
        )
    click.echo(f"built {len(built)} image(s) in {time.monotonic() - started:.0f}s")


def _register_subcommands() -> None:
    import importlib  # noqa: PLC0415

    for name in ("render", "validate", "simulate", "summaries"):
        module = importlib.import_module(f"modelplane.{name}")
        cli.add_command(module.command)


_register_subcommands()
