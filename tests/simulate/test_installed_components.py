"""`modelplane simulate` of an Existing cluster that already runs its whole serving stack: the
stack observes (never installs) each component and converges; a component that goes missing is
named on the cluster, and nothing is deleted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition, condition_status
from modelplane.providers import matching

PLATFORM = repo.root() / "examples" / "platform"
LWS_CRD = "leaderworkersets.leaderworkerset.x-k8s.io"
CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "lab-h100", "labels": {"modelplane.ai/region": "on-prem"}},
    "spec": {
        "cluster": {
            "source": "Existing",
            "existing": {
                "secretRef": {"name": "lab-h100-kubeconfig"},
                "installed": {"all": True},
                "nvidiaDriverRoot": "/run/nvidia/driver",
            },
        },
        "nodePools": [{"name": "h100", "className": "h100-8x-byo", "nodeCount": 2}],
    },
}


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    for name in ("namespaces.yaml", "inferencegateway.yaml", "inferenceclass-h100-byo.yaml",
                 "kubeconfig.yaml"):  # fmt: skip
        shutil.copy(PLATFORM / name, tmp_path / name)
    (tmp_path / "inferencecluster.yaml").write_text(yaml.safe_dump(CLUSTER))
    return tmp_path


@pytest.mark.timeout(600)
def test_an_existing_cluster_with_everything_installed_converges_then_reports_what_goes_missing(
    directory: Path,
):
    with session(directory) as plane:
        assert plane.run(max_rounds=40).converged
        ic = plane.find("InferenceCluster", "lab-h100")
        assert condition_status(ic, "Ready") == "True"
        assert ic["status"]["gateway"]["address"]
        (stack,) = plane.list(kind="ServingStack", namespace="modelplane-system")
        assert stack["spec"]["nvidiaDriverRoot"] == "/run/nvidia/driver"
        assert condition(stack, "StackReady")["reason"] == "NothingMissing"
        # Nothing installed: no Helm release at all on the workload cluster.
        composed = plane.composed_by(stack)
        assert [o for o in composed if o["kind"] == "Release"] == []
        objects = [o for o in composed if o["kind"] == "Object"]
        observers = [o for o in objects if o["spec"].get("managementPolicies") == ["Observe"]]
        assert len(observers) == 9
        assert all(condition_status(o, "Ready") == "True" for o in observers)
        uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in objects}

        # The platform team's LWS goes away: the cluster says so, by name.
        gone = plane.providers.inject(
            matching(kind="Object", manifest_kind="CustomResourceDefinition",
                     manifest_name=LWS_CRD),
            absent=True,
        )  # fmt: skip
        assert plane.run(max_rounds=40).converged
        ic = plane.find("InferenceCluster", "lab-h100")
        backend = condition(ic, "BackendReady")
        assert (backend["status"], backend["reason"]) == ("False", "ComponentMissing")
        assert (
            f"leaderWorkerSet (CustomResourceDefinition {LWS_CRD} not found)"
            in (backend["message"])
        )
        assert condition_status(ic, "Ready") == "False"
        # Nothing was deleted or recreated meanwhile.
        after = [o for o in plane.composed_by(stack) if o["kind"] == "Object"]
        assert {o["metadata"]["name"]: o["metadata"]["uid"] for o in after} == uids

        plane.providers.clear(gone)
        assert plane.run(max_rounds=40).converged
        ic = plane.find("InferenceCluster", "lab-h100")
        assert condition_status(ic, "Ready") == "True"
        assert condition(ic, "BackendReady")["reason"] == "BackendHealthy"
