"""compose-vultr-cluster through real gRPC: the VKE cluster with its system pool and
kubeconfig, a node pool per GPU pool (NVIDIA or AMD), readiness, and hold-on-invalid."""

from __future__ import annotations

import copy

import pytest
from compose_vultr_cluster.fn import VultrClusterFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    desired_status,
    make_request,
    observe,
    ready_status,
    results,
    validate_against_model,
)

NS = "modelplane-system"
NAME = "vke-ewr"
KUBECONFIG = child_name(NAME, "kubeconfig")
ENDPOINT = "0a1b2c3d-1111-2222-3333-444455556666.vultr-k8s.com"


def vultr_xr() -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "VultrCluster",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "region": "ewr",
                "nodePools": [
                    {
                        "name": "a100-pool",
                        "role": "GPU",
                        "plan": "vcg-a100-12c-120g-80vram",
                        "nodeCount": 2,
                        "maxNodeCount": 4,
                        "gpu": {"acceleratorType": "nvidia-a100-80gb"},
                    }
                ],
            },
        }
    )
    assert validate_object(xr) == []
    return xr


def validate_against_crd(body: dict, name: str = "x") -> None:
    """The composed body against the generated model of its provider CRD, and against the CRD
    itself (CEL included) once named as Crossplane names it."""
    validate_against_model(body)
    named = copy.deepcopy(body)
    named.setdefault("metadata", {}).setdefault("name", name)
    named["metadata"].setdefault("namespace", NS)
    assert validate_object(named) == [], body["kind"]


def run(xr: dict, observed: dict[str, dict] | None = None):
    rsp = run_function(VultrClusterFunction(), make_request(xr, observed))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    return rsp


def observe_all(desired: dict[str, dict]) -> dict[str, dict]:
    """Every composed resource as its provider reports it once Ready."""
    observed = {}
    for key, body in desired.items():
        status = ready_status()
        if key == "cluster":
            status["atProvider"] = {"endpoint": ENDPOINT, "status": "active"}
        observed[key] = observe(body, status, name=f"{NAME}-{key}")
    return observed


def test_first_pass_composes_the_cluster_pools_and_provider_configs_all_valid():
    rsp = run(vultr_xr())
    desired = desired_resources(rsp)
    assert set(desired) == {
        "cluster", "nodepool-a100-pool", "provider-config-kubernetes", "provider-config-helm",
    }  # fmt: skip
    for key, body in desired.items():
        validate_against_crd(body, name=f"{NAME}-{key}")


def test_cluster_has_a_fixed_system_pool_and_publishes_its_kubeconfig():
    cluster = desired_resources(run(vultr_xr()))["cluster"]
    spec = cluster["spec"]
    assert spec["writeConnectionSecretToRef"] == {"name": KUBECONFIG}
    fp = spec["forProvider"]
    assert (fp["label"], fp["region"], fp["version"], fp["haControlplanes"]) == (
        NAME,
        "ewr",
        "v1.35.0+1",
        False,
    )
    assert "vpcId" not in fp  # VKE makes the cluster's VPC
    system = fp["nodePools"]
    assert (system["label"], system["plan"], system["nodeQuantity"]) == ("system", "vc2-4c-8gb", 2)
    assert system["autoScaler"] is False  # a fixed size: nothing moves it under the provider
    assert system["labels"] == [{"key": "modelplane.ai/pool", "value": "system"}]


def test_nvidia_pool_is_tainted_labelled_and_autoscales_from_its_initial_size():
    pool = desired_resources(run(vultr_xr()))["nodepool-a100-pool"]
    fp = pool["spec"]["forProvider"]
    assert fp["plan"] == "vcg-a100-12c-120g-80vram"
    assert fp["clusterIdSelector"] == {"matchControllerRef": True}
    assert fp["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert {label["key"]: label["value"] for label in fp["labels"]} == {
        "modelplane.ai/pool": "a100-pool",
        "modelplane.ai/gpu": "nvidia-a100-80gb",
        "nvidia.com/gpu.present": "true",
    }
    assert (fp["autoScaler"], fp["minNodes"], fp["maxNodes"]) == (True, 0, 4)
    # The size is set once, at creation: VKE's autoscaler owns it afterwards.
    assert "nodeQuantity" not in fp
    assert pool["spec"]["initProvider"] == {"nodeQuantity": 2}


def test_amd_pool_is_tainted_amd_and_carries_no_nvidia_label():
    xr = vultr_xr()
    xr["spec"]["nodePools"][0].update(
        name="mi300x",
        plan="vcg-mi300x-8c-192g-192vram",
        gpu={"acceleratorType": "amd-mi300x", "vendor": "AMD"},
    )
    fp = desired_resources(run(xr))["nodepool-mi300x"]["spec"]["forProvider"]
    assert fp["taints"] == [{"key": "amd.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert {label["key"]: label["value"] for label in fp["labels"]} == {
        "modelplane.ai/pool": "mi300x",
        "modelplane.ai/gpu": "amd-mi300x",
    }


def test_provider_configs_read_the_kubeconfig_without_an_identity():
    desired = desired_resources(run(vultr_xr()))
    for key in ("provider-config-kubernetes", "provider-config-helm"):
        assert desired[key]["spec"] == {
            "credentials": {
                "source": "Secret",
                "secretRef": {"name": KUBECONFIG, "namespace": NS, "key": "kubeconfig"},
            }
        }


def test_status_publishes_the_kubeconfig_secret_then_the_endpoint_once_observed():
    rsp = run(vultr_xr())
    assert desired_status(rsp) == {
        "secrets": [{"type": "Kubeconfig", "name": KUBECONFIG, "key": "kubeconfig"}]
    }
    observed = observe_all(desired_resources(rsp))
    status = desired_status(run(vultr_xr(), observed))
    assert status["endpoint"] == ENDPOINT
    assert validate_object({**vultr_xr(), "status": status}) == []


def test_readiness_waits_for_the_cluster_then_names_what_is_pending():
    rsp = run(vultr_xr())
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    observed = observe_all(desired_resources(rsp))
    rsp = run(vultr_xr(), observed)
    assert all(desired_ready(rsp).values())
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")
    observed["nodepool-a100-pool"]["status"] = {}
    rsp = run(vultr_xr(), observed)
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("True", "ClusterRunning")
    assert "nodepool-a100-pool" in message
    assert desired_ready(rsp)["nodepool-a100-pool"] is False


def test_missing_provider_status_loses_nothing():
    """A cloud resource whose status vanished (a restore, a provider restart) stays composed."""
    observed = observe_all(desired_resources(run(vultr_xr())))
    for body in observed.values():
        body.pop("status")
    rsp = run(vultr_xr(), observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert "endpoint" not in desired_status(rsp)
    assert desired_status(rsp)["secrets"][0]["name"] == KUBECONFIG


def test_malformed_provider_status_loses_nothing():
    observed = observe_all(desired_resources(run(vultr_xr())))
    observed["cluster"]["status"] = {"atProvider": "garbage", "conditions": "nope"}
    rsp = run(vultr_xr(), observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")


def test_removing_a_pool_from_a_valid_spec_deletes_only_that_pool():
    xr = vultr_xr()
    xr["spec"]["nodePools"].append(copy.deepcopy(xr["spec"]["nodePools"][0]) | {"name": "spare"})
    observed = observe_all(desired_resources(run(xr)))
    assert "nodepool-spare" in observed
    desired = desired_resources(run(vultr_xr(), observed))
    assert set(observed) - set(desired) == {"nodepool-spare"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"plan": "VCG A100"}, "spec.nodePools[0].plan"),
        ({"plan": "vc2-4c-8gb"}, "spec.nodePools[0].plan"),
        ({"minNodeCount": 3}, "spec.nodePools[0].minNodeCount"),
        ({"name": "system"}, "spec.nodePools[0].name"),
    ],
)
def test_invalid_input_holds_every_observed_resource_and_names_the_field(change, field):
    observed = observe_all(desired_resources(run(vultr_xr())))
    previous = desired_status(run(vultr_xr(), observed))
    broken = copy.deepcopy({**vultr_xr(), "status": previous})
    broken["spec"]["nodePools"][0].update(change)
    rsp = run(broken, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        assert body["spec"] == observed[key]["spec"], key
    assert desired_status(rsp) == previous
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert field in message, message


@pytest.mark.parametrize(
    ("field", "value"),
    [("region", "New Jersey"), ("kubernetesVersion", "1.35")],
)
def test_a_bad_region_or_version_is_held_naming_the_field(field: str, value: str):
    xr = vultr_xr()
    xr["spec"][field] = value
    rsp = run(xr)
    assert desired_resources(rsp) == {}
    assert f"spec.{field}" in conditions(rsp)["ClusterReady"][2]
