"""The command line every function starts with, written once.

``<function-name> [--insecure] [--address HOST:PORT] [--tls-certs-dir DIR] [--debug]
[--log-format json|text]``. Crossplane starts it with no arguments: it listens on
``0.0.0.0:9443`` with mTLS material from ``TLS_SERVER_CERTS_DIR``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any, TextIO

import click
import grpc
import structlog
from crossplane.function import cli as sdk_cli
from crossplane.function import runtime as sdk_runtime
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from grpc_reflection.v1alpha import reflection

from modelplane_common.function import CompositionFunction
from modelplane_common.serving import MIB, add_function

LOG_FORMATS = ("json", "text")


def configure_logging(debug: bool, log_format: str = "json", stream: TextIO | None = None) -> None:
    """Structured logs on stdout: one JSON object a line (log pipelines) or key=value text.

    Info carries one line per request; ``debug`` adds each decision (function.py)."""
    processors: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", key="ts"),
    ]
    if log_format == "json":
        processors += [
            structlog.processors.EventRenamer("msg"),
            structlog.processors.JSONRenderer(),
        ]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if debug else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stdout),
        cache_logger_on_first_use=False,
    )


def function_cli(make_runner: Callable[[], grpcv1.FunctionRunnerServiceServicer]) -> click.Command:
    """A click command that serves the runner ``make_runner`` builds over gRPC."""

    @click.command(context_settings={"help_option_names": ["-h", "--help"]})
    @sdk_cli.standard_options
    @click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="json",
        show_default=True,
        envvar="LOG_FORMAT",
        help="json: one object a line, for log pipelines; text: key=value for people.",
    )
    def command(log_format: str, **options: Any) -> None:
        """Serve this composition function over gRPC."""
        insecure, tls_certs_dir = options["insecure"], options["tls_certs_dir"]
        if not insecure and not tls_certs_dir:
            raise click.UsageError(
                "give --insecure or --tls-certs-dir DIR (or TLS_SERVER_CERTS_DIR)"
            )
        # The SDK's run() would configure its own logging; serve with ours instead.
        configure_logging(options["debug"], log_format)
        receive = options["max_recv_message_size"]
        send = options["max_send_message_size"] or receive
        grpc_options = [
            ("grpc.max_receive_message_length", receive * MIB),
            ("grpc.max_send_message_length", send * MIB),
        ]
        try:
            runner = make_runner()
            if isinstance(runner, CompositionFunction):
                runner.message_limit = receive * MIB
            # Everything imported so far (generated models, CEL environments) lives as long as
            # the process: out of the collector's sight, a full collection during a request
            # scans only what requests allocate.
            gc.freeze()
            structlog.get_logger().info("serving", address=options["address"], mtls=not insecure)
            serve(
                runner,
                options["address"],
                creds=None if insecure else sdk_runtime.load_credentials(str(tls_certs_dir)),
                options=grpc_options,
            )
        except Exception as err:
            raise click.ClickException(f"cannot run function: {err}") from err

    return command


def serve(
    runner: grpcv1.FunctionRunnerServiceServicer,
    address: str,
    *,
    creds: grpc.ServerCredentials | None,
    options: list[tuple[str, Any]],
) -> None:
    """Serve ``runner`` as the SDK's ``runtime.serve`` does (v1 and v1beta1 RunFunction,
    reflection, a graceful stop on SIGTERM; insecure when ``creds`` is None), with v1 served
    by ``serving.add_function``, which tells the runner each request's size."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = grpc.aio.server(options=options)
    grace = sdk_runtime.SHUTDOWN_GRACE_PERIOD_SECONDS
    loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(server.stop(grace)))
    add_function(runner, server)
    grpcv1beta1.add_FunctionRunnerServiceServicer_to_server(
        sdk_runtime.BetaFunctionRunner(wrapped=runner), server
    )
    reflection.enable_server_reflection(sdk_runtime.SERVICE_NAMES, server)
    if creds is None:
        server.add_insecure_port(address)
    else:
        server.add_secure_port(address, creds)

    async def run() -> None:
        await server.start()
        await server.wait_for_termination()

    try:
        loop.run_until_complete(run())
    finally:
        loop.run_until_complete(server.stop(grace))
        loop.close()
