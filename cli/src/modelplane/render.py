"""`modelplane render` (being written)."""

import click


@click.command("render")
def command() -> None:
    """Not available yet."""
    raise click.ClickException("modelplane render is not implemented yet")
