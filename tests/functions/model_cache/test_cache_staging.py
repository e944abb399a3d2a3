"""Phase derivation and matching never fail on malformed observed objects."""

from __future__ import annotations

from compose_model_cache import staging
from hypothesis import given, settings
from hypothesis import strategies as st

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["status", "atProvider", "manifest", "phase", "conditions", "type"]),
            children,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=50)
@given(pvc=JSONISH, job=JSONISH, was_ready=st.booleans())
def test_any_observed_garbage_yields_a_phase(pvc, job, was_ready):
    phase = staging.derive_phase(pvc, job, was_ready)
    assert phase.phase in ("Pending", "Hydrating", "Ready", "Failed")
    assert isinstance(staging.object_ready(pvc), bool)
    assert staging.applied_storage_class(pvc) is None or isinstance(
        staging.applied_storage_class(pvc), str
    )


def obj(remote: dict) -> dict:
    return {"status": {"atProvider": {"manifest": {"status": remote}}}}


def test_phase_rules_in_order():
    bound = obj({"phase": "Bound"})
    complete = obj({"conditions": [{"type": "Complete", "status": "True"}]})
    failed = obj({"conditions": [{"type": "Failed", "status": "True", "reason": "R"}]})
    assert staging.derive_phase(bound, failed, was_ready=True).phase == "Failed"
    assert staging.derive_phase(bound, complete, was_ready=False).phase == "Ready"
    assert staging.derive_phase(bound, None, was_ready=True).phase == "Ready"  # latched
    assert staging.derive_phase(obj({"phase": "Pending"}), None, was_ready=True).phase == "Pending"
    assert staging.derive_phase(bound, obj({"active": 1}), was_ready=False).phase == "Hydrating"
    assert staging.derive_phase(None, None, was_ready=False).phase == "Pending"


def test_storage_class_per_source_and_override():
    def cluster(source: str, block: dict | None = None) -> dict:
        spec: dict = {"source": source}
        if block is not None:
            spec[source.lower()] = block
        return {"spec": {"cluster": spec}}

    assert staging.storage_class(cluster("GKE")) == "modelplane-rwx"
    assert staging.storage_class(cluster("EKS", {"region": "us-east-1"})) == "modelplane-rwx-efs"
    assert staging.storage_class(cluster("Existing", {"cache": {}})) == "modelplane-rwx"
    assert (
        staging.storage_class(cluster("EKS", {"cache": {"storageClassName": "efs-fast"}}))
        == "efs-fast"
    )
    assert staging.storage_class(cluster("Azure")) == "modelplane-rwx"
    assert staging.storage_class({}) == "modelplane-rwx"
