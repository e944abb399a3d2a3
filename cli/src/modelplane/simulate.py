"""`modelplane simulate` (being written)."""

import click


@click.command("simulate")
def command() -> None:
    """Not available yet."""
    raise click.ClickException("modelplane simulate is not implemented yet")
