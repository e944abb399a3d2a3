"""What merely reading a RunFunctionRequest costs, shared by bench/fleet_scale.py (``decode_ms``)
and the decoding servicer of bench/null_function.py (``floor_ms``)."""

from __future__ import annotations

import json

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.function import Request


def read(request: fnv1.RunFunctionRequest) -> None:
    """The plain dicts every function's shared ``Request`` helper gives (the XR, observed and
    desired state, context, every required object), and the JSON a required ConfigMap's data
    carries (a capacity summary is data too)."""
    view = Request(request)
    for key in request.required_resources:
        for obj in view.required(key) or []:
            if obj.get("kind") == "ConfigMap":
                for value in (obj.get("data") or {}).values():
                    json.loads(value)


def decode(data: bytes) -> None:
    """Parse the encoded request, then ``read`` it."""
    read(fnv1.RunFunctionRequest.FromString(data))
