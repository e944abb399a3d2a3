"""The ModelReplica XRD rejects every malformed replica the function relies on never seeing.

Checked with `modelplane validate`'s engine: structural schema after defaulting, then the CEL
rules, as the API server would.
"""

from __future__ import annotations

import copy

import pytest
from modelplane import validation
from replica_support import EXAMPLES, ROOT, load_docs


def _replica(case: str = "standalone") -> dict:
    (xr,) = load_docs(EXAMPLES / f"{case}.yaml")
    return xr


def _messages(obj: dict) -> list[str]:
    return [p.message for p in validation.validate_object(obj)]


@pytest.mark.parametrize(
    "case",
    [
        "standalone",
        "gang-with-cache",
        "coordinator-leader",
        "prefill-decode",
        "two-engines",
        "cluster-not-ready",
    ],
)
def test_every_example_replica_is_valid(case):
    assert _messages(_replica(case)) == []


def _one(messages: list[str], expected: str) -> None:
    assert [m for m in messages if expected in m], messages


def test_engine_split_across_pools_is_rejected_r2():
    xr = _replica("gang-with-cache")
    xr["spec"]["engines"][0]["members"][1]["nodePoolName"] = "h200"
    _one(_messages(xr), "all members of an engine must be pinned to the same node pool")


def test_worker_without_cache_is_rejected_naming_the_engine_d4():
    xr = _replica("gang-with-cache")
    del xr["spec"]["modelCacheRef"]
    _one(_messages(xr), 'engine "llama" has a Worker member')


def test_engine_without_any_device_request_is_rejected():
    xr = _replica()
    del xr["spec"]["engines"][0]["members"][0]["deviceRequests"]
    _one(_messages(xr), "at least one member of an engine must carry deviceRequests")


@pytest.mark.parametrize(
    "roles",
    [["Leader"], ["Worker"], ["Standalone", "Worker"], ["Leader", "Leader"], ["Worker", "Worker"]],
)
def test_engine_shapes_other_than_standalone_or_leader_worker_are_rejected(roles):
    xr = _replica("gang-with-cache")
    template = xr["spec"]["engines"][0]["members"][0]
    members = []
    for role in roles:
        member = copy.deepcopy(template)
        member["role"] = role
        members.append(member)
    xr["spec"]["engines"][0]["members"] = members
    _one(_messages(xr), "an engine must be either a single Standalone member or one Leader")


def test_worker_block_on_a_non_worker_member_is_rejected():
    xr = _replica()
    xr["spec"]["engines"][0]["members"][0]["worker"] = {"nodes": 2}
    _one(_messages(xr), "worker may only be set on a Worker member")


def test_phase_outside_prefill_decode_is_rejected():
    xr = _replica()
    xr["spec"]["engines"][0]["phase"] = "Decode"
    _one(_messages(xr), "engine phase may only be set when serving.mode is PrefillDecode")


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        (["Prefill", "Prefill"], "exactly one engine with phase Decode"),
        (["Decode", "Decode"], "exactly one engine with phase Prefill"),
        (["Prefill", None], "exactly one engine with phase Decode"),
    ],
)
def test_prefill_decode_needs_one_engine_per_phase(phases, expected):
    xr = _replica("prefill-decode")
    for engine, phase in zip(xr["spec"]["engines"], phases, strict=True):
        if phase is None:
            engine.pop("phase")
        else:
            engine["phase"] = phase
    _one(_messages(xr), expected)


def test_prefill_decode_needs_exactly_two_engines():
    xr = _replica("prefill-decode")
    third = copy.deepcopy(xr["spec"]["engines"][1])
    third["name"] = "decode-b"
    xr["spec"]["engines"].append(third)
    _one(_messages(xr), "PrefillDecode serving requires exactly two engines")


def test_the_single_container_must_be_named_engine():
    xr = _replica()
    xr["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]["name"] = "vllm"
    _one(_messages(xr), "the single container must be named 'engine'")


def test_empty_selector_and_empty_request_list_are_rejected():
    xr = _replica()
    request = xr["spec"]["engines"][0]["members"][0]["deviceRequests"][0]
    request["selectors"] = [{}]
    assert any("selectors[0]" in str(p) for p in validation.validate_object(xr))
    xr = _replica()
    xr["spec"]["engines"][0]["members"][0]["deviceRequests"] = []
    assert any("deviceRequests" in str(p) for p in validation.validate_object(xr))


def test_engine_names_must_be_dns_labels_and_unique():
    xr = _replica("two-engines")
    xr["spec"]["engines"][1]["name"] = "Embed_Model"
    assert any("engines[1].name" in str(p) for p in validation.validate_object(xr))
    xr = _replica("two-engines")
    xr["spec"]["engines"][1]["name"] = "chat"
    assert any("Duplicate" in p or "duplicate" in p for p in _messages(xr))


def test_defaults_fill_role_copies_count_and_mode():
    xr = _replica("two-engines")
    xr["spec"]["serving"] = {}
    stored = validation.defaulted(xr)
    engine = stored["spec"]["engines"][1]
    assert engine["copies"] == 1
    assert engine["members"][0]["role"] == "Standalone"
    assert engine["members"][0]["deviceRequests"][0]["count"] == 1
    assert stored["spec"]["serving"] == {"mode": "Unified"}
    assert "worker" not in engine["members"][0]


def test_definition_and_composition_pass_the_api_server_checks():
    for name in ("definition.yaml", "composition.yaml"):
        (doc,) = load_docs(ROOT / "apis" / "modelreplicas" / name)
        assert [str(p) for p in validation.validate_object(doc)] == [], name
    (definition,) = load_docs(ROOT / "apis" / "modelreplicas" / "definition.yaml")
    (version,) = definition["spec"]["versions"]
    assert definition["spec"]["names"]["shortNames"] == ["mr"]
    assert version["additionalPrinterColumns"] == [
        {"name": "CLUSTER", "type": "string", "jsonPath": ".spec.clusterName"}
    ]
