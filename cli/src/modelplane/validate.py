"""`modelplane validate` (being written)."""

import click


@click.command("validate")
def command() -> None:
    """Not available yet."""
    raise click.ClickException("modelplane validate is not implemented yet")
