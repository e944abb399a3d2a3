"""Encoding composed resources into the response: a map several resources share is encoded
once and copied, with the same result as encoding each on its own."""

from __future__ import annotations

from google.protobuf import struct_pb2
from modelplane_common.plain import fill_struct, to_plain


def test_shared_maps_encode_as_if_each_were_its_own():
    manifest = {"kind": "Job", "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    bodies = [
        {"spec": {"forProvider": {"manifest": manifest}, "providerConfigRef": {"name": f"pc-{i}"}}}
        for i in range(3)
    ]
    shared: dict = {}
    structs = []
    for body in bodies:
        struct = struct_pb2.Struct()
        fill_struct(struct, body, shared)
        structs.append(struct)
    for body, struct in zip(bodies, structs, strict=True):
        alone = struct_pb2.Struct()
        fill_struct(alone, body)
        assert struct == alone
        assert to_plain(struct) == body
    # Each keeps its own provider config: only the shared map is copied.
    assert [to_plain(s)["spec"]["providerConfigRef"]["name"] for s in structs] == [
        "pc-0",
        "pc-1",
        "pc-2",
    ]
