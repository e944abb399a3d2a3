"""Server-side apply in the simulator: after any sequence of intents, the object holds exactly
the latest intent plus whatever other writers own."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane.controlplane import ControlPlane

API = "test.modelplane.ai/v1alpha1"

keys = st.sampled_from(["a", "b", "c", "d"])
leaves = st.one_of(st.integers(0, 3), st.text("xyz", max_size=2), st.lists(st.integers(0, 2)))
trees = st.recursive(
    leaves, lambda children: st.dictionaries(keys, children, min_size=1, max_size=3), max_leaves=8
)
intents = st.dictionaries(keys, trees, max_size=3)
THING_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Thing", "plural": "things"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


# The fixtures are stateless across examples: the runner's function is replaced per example
# and the catalog is read-only.
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(intents, min_size=1, max_size=4))
def test_object_holds_latest_intent_and_foreign_fields(runner, test_catalog, sequence):
    state = {"spec": {}}
    runner.functions["compose-widget"] = lambda xr, observed, required: runner.result(
        {
            "thing": (
                {"apiVersion": "example.com/v1", "kind": "Thing", "spec": state["spec"]},
                "True",
            )
        }
    )
    plane = ControlPlane(runner, catalog=test_catalog)
    plane.apply(THING_CRD)  # a strict API server serves Things only once this is Established
    plane.apply({"apiVersion": API, "kind": "Widget", "metadata": {"name": "w"}, "spec": {}})
    first = True
    for spec in sequence:
        state["spec"] = spec
        assert plane.run(max_rounds=5).converged
        (thing,) = plane.list("example.com/v1", "Thing")
        if first:
            # Another writer owns a separate label; it must survive every later apply.
            key = ("example.com/v1", "Thing", "default", thing["metadata"]["name"])
            plane.patch(key, {"metadata": {"labels": {"owner": "someone-else"}}})
            first = False
        (thing,) = plane.list("example.com/v1", "Thing")
        assert thing.get("spec", {}) == spec
        assert thing["metadata"]["labels"]["owner"] == "someone-else"
