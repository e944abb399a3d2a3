"""The reserved namespaces (D10) are exactly where the platform installs: a tenant of one of
these names would mix its pods with the serving stack's, and be deleted with it."""

from __future__ import annotations

import pytest
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import lookup
from modelplane_common import tenancy

PLATFORM_EXAMPLE = repo.root() / "examples" / "platform"


def test_every_namespace_the_platform_installs_into_is_reserved():
    with session(PLATFORM_EXAMPLE) as plane:
        assert plane.run(max_rounds=60).converged
        used = set()
        for obj in plane.objects():
            if obj["kind"] == "Release":
                used.add(lookup(obj, ".spec.forProvider.namespace"))
            elif obj["kind"] == "Object":
                manifest = lookup(obj, ".spec.forProvider.manifest") or {}
                if manifest.get("kind") == "Namespace":
                    used.add(lookup(manifest, ".metadata.name"))
                else:
                    used.add(lookup(manifest, ".metadata.namespace"))
            elif obj["kind"] in ("ServingStack", "Usage", "ProviderConfig"):
                used.add(obj["metadata"].get("namespace"))
    used -= {None, "", "default"}
    assert used  # the example does install the stack
    assert {n for n in used if not tenancy.reserved_reason(n)} == set()


@pytest.mark.parametrize("name", ["ml-team", "team-a", "default", "kubeflow", "system"])
def test_ordinary_names_are_not_reserved(name):
    assert tenancy.reserved_reason(name) == ""


@pytest.mark.parametrize("name", ["kube-system", "kube-public", "kube-x", "modelplane-system"])
def test_reserved_names_say_why(name):
    assert repr(name) in tenancy.reserved_reason(name)
