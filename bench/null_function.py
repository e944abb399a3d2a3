"""A servicer that answers every RunFunction at once with an empty response, served by the
same SDK runtime as the functions (``--insecure``, gRPC's default 4 MiB limit): its round
trip is what a call costs before a function does anything (bench/fleet_scale.py's ``null_ms``).

Run: ``python bench/null_function.py 127.0.0.1:PORT [LIMIT_MIB]``.
"""

from __future__ import annotations

import sys

import grpc
from crossplane.function import runtime as sdk_runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class NullFunction(grpcv1.FunctionRunnerServiceServicer):
    async def RunFunction(  # noqa: N802 - gRPC method name
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        return fnv1.RunFunctionResponse()


if __name__ == "__main__":
    limit = int(sys.argv[2]) * 1024 * 1024 if len(sys.argv) > 2 else None
    options = [("grpc.max_receive_message_length", limit)] if limit else None
    sdk_runtime.serve(NullFunction(), sys.argv[1], creds=None, insecure=True, options=options)
