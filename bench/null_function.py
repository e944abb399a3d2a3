"""A servicer that answers every RunFunction at once with an empty response, served as the
functions are (``modelplane_common.runtime.serve``: the same gRPC handler, which hands the
request and its size to ``run_sized``; ``--insecure``, gRPC's default 4 MiB limit): its round
trip is what a call costs before a function does anything (bench/fleet_scale.py's
``null_ms``).

Run: ``python bench/null_function.py 127.0.0.1:PORT [LIMIT_MIB]``.
"""

from __future__ import annotations

import sys

import grpc
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common.runtime import serve

MIB = 1024 * 1024


class NullFunction(grpcv1.FunctionRunnerServiceServicer):
    def run_sized(self, req: fnv1.RunFunctionRequest, size: int) -> fnv1.RunFunctionResponse:
        return fnv1.RunFunctionResponse()

    async def RunFunction(  # noqa: N802 - gRPC method name (v1beta1, through the SDK's wrapper)
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        return fnv1.RunFunctionResponse()


if __name__ == "__main__":
    limit = (int(sys.argv[2]) if len(sys.argv) > 2 else 4) * MIB
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    serve(NullFunction(), sys.argv[1], creds=None, options=options)
