"""Whatever a user writes, validate answers with problems, never an exception."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane import repo, validation

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)

BASE: dict[str, Any] = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "c"},
    "spec": {
        "provisioning": {"provider": "GKE", "gke": {"machineType": "m", "accelerator": {}}},
        "devices": [{"name": "gpu", "driver": "d", "attributes": {"a": {"int": 1}}}],
    },
}
PLACES = [
    ("spec",),
    ("spec", "devices"),
    ("spec", "devices", 0),
    ("spec", "devices", 0, "attributes"),
    ("spec", "devices", 0, "attributes", "a"),
    ("spec", "devices", 0, "claim"),
    ("spec", "provisioning"),
    ("spec", "provisioning", "provider"),
    ("spec", "provisioning", "gke", "accelerator"),
    ("metadata",),
    ("metadata", "name"),
]


@settings(max_examples=50, deadline=None)
@given(place=st.sampled_from(PLACES), value=JSON_VALUES)
def test_any_value_anywhere_gives_problems_not_exceptions(place, value):
    obj = copy.deepcopy(BASE)
    parent: Any = obj
    for part in place[:-1]:
        parent = parent[part]
    parent[place[-1]] = value
    problems = validation.validate_object(obj, "fuzz.yaml")
    assert all(isinstance(p, validation.Problem) and str(p) for p in problems)


@settings(max_examples=30, deadline=None)
@given(value=JSON_VALUES)
def test_any_document_gives_problems_not_exceptions(value):
    problems = validation.validate_object(value, "fuzz.yaml")
    assert all(isinstance(p, validation.Problem) for p in problems)


def _xrd_places(node: Any, path: tuple = ()) -> list[tuple]:
    places = [path] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            places += _xrd_places(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            places += _xrd_places(value, (*path, index))
    return places


XRD = yaml.safe_load((repo.root() / "apis/inferenceclasses/definition.yaml").read_text())
XRD_PLACES = _xrd_places(XRD)


@settings(max_examples=50, deadline=None)
@given(place=st.sampled_from(XRD_PLACES), value=JSON_VALUES)
def test_a_malformed_xrd_gives_problems_not_exceptions(place, value):
    body = copy.deepcopy(XRD)
    parent: Any = body
    for part in place[:-1]:
        parent = parent[part]
    parent[place[-1]] = value
    problems = validation.check_definition(body, "fuzz.yaml")
    assert all(isinstance(p, validation.Problem) for p in problems)
