"""Encoding composed resources into the response: a map several resources share is encoded
once and copied, with the same result as encoding each on its own."""

from __future__ import annotations

from google.protobuf import struct_pb2
from modelplane_common.plain import Variant, fill_struct, to_plain


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


def test_variants_encode_as_their_whole_maps_and_leave_their_base_alone():
    """Objects that differ only in a label and a provider config (one cluster's cache PVC
    Object each) encode, from one encoding of their base, exactly as each map alone."""
    base = {
        "metadata": {"labels": {"cluster": "a", "team": "ml"}},
        "spec": {"providerConfigRef": {"kind": "K", "name": "pc-a"}, "watch": True},
    }
    label, config = ("metadata", "labels", "cluster"), ("spec", "providerConfigRef", "name")
    variants = [Variant(base, ((label, c), (config, f"pc-{c}"))) for c in ("a", "b", "c")]
    assert variants[1] == {
        "metadata": {"labels": {"cluster": "b", "team": "ml"}},
        "spec": {"providerConfigRef": {"kind": "K", "name": "pc-b"}, "watch": True},
    }
    assert base["metadata"]["labels"]["cluster"] == "a"  # copied along the paths only
    assert variants[1]["spec"] is not base["spec"]
    shared: dict = {}
    for variant in variants:
        struct, alone = struct_pb2.Struct(), struct_pb2.Struct()
        fill_struct(struct, variant, shared)
        fill_struct(alone, dict(variant))
        assert struct == alone
        assert to_plain(struct) == variant
