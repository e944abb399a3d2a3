"""The command line every function starts with, written once.

``<function-name> --insecure --address HOST:PORT [--tls-certs-dir DIR] [--debug]``
"""

from __future__ import annotations

from collections.abc import Callable

import click
from crossplane.function import cli as sdk_cli
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


def function_cli(make_runner: Callable[[], grpcv1.FunctionRunnerServiceServicer]) -> click.Command:
    """A click command that serves the runner ``make_runner`` builds over gRPC."""

    @click.command(context_settings={"help_option_names": ["-h", "--help"]})
    @sdk_cli.standard_options
    def command(**options: object) -> None:
        """Serve this composition function over gRPC."""
        if not options.get("insecure") and not options.get("tls_certs_dir"):
            raise click.UsageError("give --insecure or --tls-certs-dir DIR")
        try:
            sdk_cli.run(make_runner(), **options)  # type: ignore[arg-type]
        except Exception as err:
            raise click.ClickException(f"cannot run function: {err}") from err

    return command
