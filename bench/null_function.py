"""A servicer that answers every RunFunction with an empty response, served as the functions
are (``modelplane_common.runtime.serve``: the same gRPC handler, which parses the request and
hands it and its size to ``run_sized``; ``--insecure``, gRPC's default 4 MiB limit).

Answering at once, its round trip is what a call costs before a function does anything
(bench/fleet_scale.py's ``null_ms``). With ``--decode`` it first reads the request as every
function does (bench/decoding.py, the same work as ``decode_ms``), then answers: the least a
function served this way that reads its whole request can take (``floor_ms``).

Run: ``python bench/null_function.py 127.0.0.1:PORT [LIMIT_MIB] [--decode]``.
"""

from __future__ import annotations

import sys

import decoding  # bench/ is not a package; a script's own directory is on sys.path
import grpc
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common.runtime import serve
from modelplane_common.serving import MIB


class NullFunction(grpcv1.FunctionRunnerServiceServicer):
    def __init__(self, *, decode: bool) -> None:
        self.decode = decode

    def run_sized(self, req: fnv1.RunFunctionRequest, size: int) -> fnv1.RunFunctionResponse:
        if self.decode:
            decoding.read(req)
        return fnv1.RunFunctionResponse()

    async def RunFunction(  # noqa: N802 - gRPC method name (v1beta1, through the SDK's wrapper)
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        return fnv1.RunFunctionResponse()


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--decode"]
    limit = (int(arguments[1]) if len(arguments) > 1 else 4) * MIB
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    servicer = NullFunction(decode="--decode" in sys.argv[1:])
    serve(servicer, arguments[0], creds=None, options=options)
