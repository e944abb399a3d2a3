"""Serve a function's gRPC servicer from a background thread of this process.

``modelplane render`` and ``simulate`` host the repository's functions this way (a real gRPC
server on a loopback port, no subprocess start-up cost), and tests call functions through it
exactly as Crossplane would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from crossplane.function.cli import DEFAULT_MAX_RECV_MESSAGE_SIZE
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

# The limits as deployed, so that render and simulate refuse what Crossplane's call would (D8,
# D13). A function's console script receives, and sends, at most its --max-recv-message-size:
# the SDK's default, 4 MiB. Crossplane calls with grpc-go's defaults: it sends any size and
# receives at most 4 MiB.
MIB = 1024 * 1024
FUNCTION_MESSAGE_LIMIT = DEFAULT_MAX_RECV_MESSAGE_SIZE * MIB
CROSSPLANE_RECEIVE_LIMIT = 4 * MIB
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", FUNCTION_MESSAGE_LIMIT),
    ("grpc.max_send_message_length", FUNCTION_MESSAGE_LIMIT),
]
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", CROSSPLANE_RECEIVE_LIMIT),
    ("grpc.max_send_message_length", -1),
]


RUN_FUNCTION_SERVICE = fnv1.DESCRIPTOR.services_by_name["FunctionRunnerService"].full_name


def add_function(servicer: grpcv1.FunctionRunnerServiceServicer, server: grpc.aio.Server) -> None:
    """Serve ``servicer``'s v1 RunFunction on ``server``. A servicer with a ``run_sized``
    method (CompositionFunction) is handed each request with its size on the wire, which only
    the decoder sees: a function warns before its requests outgrow the limit it receives."""
    run_sized = getattr(servicer, "run_sized", None)
    if run_sized is None:
        grpcv1.add_FunctionRunnerServiceServicer_to_server(servicer, server)
        return

    async def run(sized: tuple[fnv1.RunFunctionRequest, int], _: object) -> object:
        return run_sized(*sized)

    handler = grpc.unary_unary_rpc_method_handler(
        run,
        request_deserializer=lambda data: (fnv1.RunFunctionRequest.FromString(data), len(data)),
        response_serializer=fnv1.RunFunctionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(RUN_FUNCTION_SERVICE, {"RunFunction": handler}),)
    )


class BackgroundServer:
    """A grpc.aio server for one servicer, running on its own event loop thread."""

    def __init__(
        self, servicer: grpcv1.FunctionRunnerServiceServicer, host: str = "127.0.0.1"
    ) -> None:
        self._servicer = servicer
        self._host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: grpc.aio.Server | None = None
        self.address = ""

    def start(self) -> str:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self.address = future.result(timeout=30)
        return self.address

    async def _start(self) -> str:
        server = grpc.aio.server(options=SERVER_OPTIONS)
        add_function(self._servicer, server)
        port = server.add_insecure_port(f"{self._host}:0")
        await server.start()
        self._server = server
        return f"{self._host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@contextmanager
def serve_in_background(
    servicer: grpcv1.FunctionRunnerServiceServicer,
) -> Iterator[grpcv1.FunctionRunnerServiceStub]:
    """Serve ``servicer`` on a loopback port and yield a connected RunFunction stub."""
    server = BackgroundServer(servicer)
    address = server.start()
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        yield grpcv1.FunctionRunnerServiceStub(channel)
    finally:
        channel.close()
        server.stop()


def run_function(
    servicer: grpcv1.FunctionRunnerServiceServicer, request: fnv1.RunFunctionRequest
) -> fnv1.RunFunctionResponse:
    """One RunFunction call over real gRPC (convenient in tests)."""
    with serve_in_background(servicer) as stub:
        return stub.RunFunction(request, timeout=60)
