"""compose-gke-cluster through real gRPC: an L4 and an H100 pool plus the injected system pool,
gate-then-hold for the IAM binding, status from observed resources, and hold-on-invalid."""

from __future__ import annotations

import copy

import pytest
from compose_gke_cluster.fn import GKEClusterFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.naming import child_name
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function
from modelplane_common.testing import validate_against_model
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.gkecluster import (
    GKECluster,
)

NS = "modelplane-system"
NAME = "gke-us-central"
KUBECONFIG = child_name(NAME, "kubeconfig")
SA_KEY = child_name(NAME, "sa-key")


def gke_xr(**overrides: object) -> dict:
    spec = {
        "project": "acme-inference",
        "region": "us-central1",
        "kubernetesVersion": "1.35",
        "nodePools": [
            {
                "name": "l4",
                "role": "GPU",
                "machineType": "g2-standard-8",
                "diskSizeGb": 200,
                "nodeCount": 1,
                "maxNodeCount": 4,
                "gpu": {"acceleratorType": "nvidia-l4", "acceleratorCount": 1},
                "zones": ["us-central1-a", "us-central1-c"],
            },
            {
                "name": "h100",
                "role": "GPU",
                "machineType": "a3-highgpu-8g",
                "nodeCount": 2,
                "minNodeCount": 1,
                "maxNodeCount": 2,
                "gpu": {"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8},
                "zones": ["us-central1-b"],
            },
        ],
    }
    spec.update(overrides)
    xr = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "GKECluster",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": spec,
    }
    GKECluster.model_validate(xr)
    return xr


def run(xr: dict, observed: dict[str, dict] | None = None) -> fnv1.RunFunctionResponse:
    request = fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                key: fnv1.Resource(resource=to_struct(body))
                for key, body in (observed or {}).items()
            },
        )
    )
    return run_function(GKEClusterFunction(), request)


def desired(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    return {key: to_plain(r.resource) for key, r in rsp.desired.resources.items()}


def ready(rsp: fnv1.RunFunctionResponse) -> dict[str, int]:
    return {key: r.ready for key, r in rsp.desired.resources.items()}


def condition(rsp: fnv1.RunFunctionResponse, type_: str) -> fnv1.Condition:
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found


def fatal(rsp: fnv1.RunFunctionResponse) -> list[str]:
    return [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]


def observe(key: str, body: dict, **status: object) -> dict:
    """What Crossplane observes once ``body`` exists: a generated name, server metadata,
    the composition-resource-name annotation, a Ready condition, and ``status``."""
    out = copy.deepcopy(body)
    metadata = out.setdefault("metadata", {})
    metadata.setdefault("name", f"{NAME}-{key}-x7k2p")
    metadata["uid"] = f"uid-{key}"
    metadata["resourceVersion"] = "42"
    metadata.setdefault("annotations", {})["crossplane.io/composition-resource-name"] = key
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Available",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    out["status"] = {"conditions": conditions, **status}
    return out


def all_observed(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    """Every desired resource observed Ready, with the status a real cluster would report."""
    observed = {key: observe(key, body) for key, body in desired(rsp).items()}
    observed["network"]["metadata"]["annotations"]["crossplane.io/external-name"] = (
        "gke-us-central-net-x7k2p"
    )
    observed["cluster"]["status"]["atProvider"] = {"endpoint": "34.1.2.3"}
    observed["service-account"]["status"]["atProvider"] = {
        "email": "mp-gke-us-central@acme-inference.iam.gserviceaccount.com"
    }
    return observed


EXPECTED_KEYS = {
    "network",
    "projectservice-filestore",
    "subnet",
    "cluster",
    "nodepool-system",
    "nodepool-l4",
    "nodepool-h100",
    "service-account",
    "service-account-key",
    "provider-config-kubernetes",
    "provider-config-helm",
}


def test_l4_and_h100_pools_compose_a_whole_cluster_and_every_manifest_validates():
    rsp = run(gke_xr())
    assert not fatal(rsp)
    resources = desired(rsp)
    # The IAM binding waits for the service account's email (C3).
    assert set(resources) == EXPECTED_KEYS
    for body in resources.values():
        validate_against_model(body)
        # No providerConfigRef: every managed resource uses the operator's default.
        if body["apiVersion"].endswith("upbound.io/v1beta1"):
            assert "providerConfigRef" not in body["spec"]

    l4 = resources["nodepool-l4"]["spec"]["forProvider"]
    assert l4["initialNodeCount"] == 1
    assert l4["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}
    assert l4["nodeLocations"] == ["us-central1-a", "us-central1-c"]
    assert l4["clusterSelector"] == {"matchControllerRef": True}
    assert l4["nodeConfig"]["machineType"] == "g2-standard-8"
    assert l4["nodeConfig"]["diskSizeGb"] == 200
    assert l4["nodeConfig"]["labels"] == {
        "modelplane.ai/pool": "l4",
        "modelplane.ai/gpu": "nvidia-l4",
        "cloud.google.com/gke-nvidia-gpu-dra-driver": "true",
        # GKE's DRA guide: GKE's device plugin off, so only the DRA driver offers the GPUs.
        "gke-no-default-nvidia-gpu-device-plugin": "true",
        "nvidia.com/gpu.present": "true",
    }
    # GKE's DRA guide: no automatic driver; the ServingStack installs it.
    assert l4["nodeConfig"]["guestAccelerator"] == [
        {
            "type": "nvidia-l4",
            "count": 1,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
        }
    ]

    h100 = resources["nodepool-h100"]["spec"]["forProvider"]
    assert h100["initialNodeCount"] == 2
    assert h100["autoscaling"] == {"minNodeCount": 1, "maxNodeCount": 2}
    assert h100["nodeLocations"] == ["us-central1-b"]
    assert h100["nodeConfig"]["diskSizeGb"] == 100
    assert h100["nodeConfig"]["guestAccelerator"][0]["count"] == 8
    assert h100["nodeConfig"]["labels"]["modelplane.ai/pool"] == "h100"

    system = resources["nodepool-system"]["spec"]["forProvider"]
    assert system["initialNodeCount"] == 1
    assert system["autoscaling"] == {"minNodeCount": 1, "maxNodeCount": 2}
    assert system["nodeConfig"] == {
        "machineType": "e2-standard-4",
        "imageType": "COS_CONTAINERD",
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
        "labels": {"modelplane.ai/pool": "system"},
    }
    assert "guestAccelerator" not in system["nodeConfig"]


def test_cluster_network_and_identity_follow_the_spec():
    resources = desired(run(gke_xr()))
    cluster = resources["cluster"]["spec"]
    fp = cluster["forProvider"]
    assert fp["location"] == "us-central1"
    assert fp["minMasterVersion"] == "1.35"
    assert fp["removeDefaultNodePool"] is True and fp["deletionProtection"] is False
    assert fp["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }
    assert fp["releaseChannel"] == {"channel": "REGULAR"}
    assert fp["workloadIdentityConfig"] == {"workloadPool": "acme-inference.svc.id.goog"}
    assert fp["addonsConfig"] == {"gcpFilestoreCsiDriverConfig": {"enabled": True}}
    assert cluster["writeConnectionSecretToRef"] == {"name": KUBECONFIG}
    # GKE cluster names are at most 40 characters and must start with a letter.
    # The GKE cluster is named after the XR whenever GKE accepts that name.
    cluster_name = resources["cluster"]["metadata"]["annotations"]["crossplane.io/external-name"]
    assert cluster_name == NAME

    subnet = resources["subnet"]["spec"]["forProvider"]
    assert subnet["ipCidrRange"] == "10.0.0.0/24"
    assert subnet["secondaryIpRange"] == [
        {"rangeName": "pods", "ipCidrRange": "10.1.0.0/16"},
        {"rangeName": "services", "ipCidrRange": "10.2.0.0/16"},
    ]
    assert resources["network"]["spec"]["forProvider"] == {
        "project": "acme-inference",
        "autoCreateSubnetworks": False,
    }
    service = resources["projectservice-filestore"]["spec"]["forProvider"]
    assert service["service"] == "file.googleapis.com"
    assert service["disableOnDestroy"] is False
    key = resources["service-account-key"]["spec"]
    assert key["writeConnectionSecretToRef"] == {"name": SA_KEY}

    for pc_key in ("provider-config-kubernetes", "provider-config-helm"):
        pc = resources[pc_key]
        assert pc["metadata"]["name"] == KUBECONFIG
        assert pc["spec"]["credentials"] == {
            "source": "Secret",
            "secretRef": {"name": KUBECONFIG, "namespace": NS, "key": "kubeconfig"},
        }
        assert pc["spec"]["identity"] == {
            "type": "GoogleApplicationCredentials",
            "source": "Secret",
            "secretRef": {"name": SA_KEY, "namespace": NS, "key": "private_key"},
        }


def test_status_secrets_are_published_from_the_first_pass_and_nothing_is_ready_yet():
    rsp = run(gke_xr())
    status = to_plain(rsp.desired.composite.resource)["status"]
    assert status == {
        "secrets": [
            {"type": "Kubeconfig", "name": KUBECONFIG, "key": "kubeconfig"},
            {"type": "GCPServiceAccountKey", "name": SA_KEY, "key": "private_key"},
        ]
    }
    flags = ready(rsp)
    assert flags["provider-config-kubernetes"] == fnv1.READY_TRUE
    assert flags["cluster"] == fnv1.READY_FALSE
    cond = condition(rsp, "ClusterReady")
    assert (cond.status, cond.reason) == (fnv1.STATUS_CONDITION_FALSE, "Provisioning")


def test_observed_cluster_publishes_network_endpoint_and_opens_the_iam_gate():
    first = run(gke_xr())
    observed = all_observed(first)
    second = run(gke_xr(), observed)
    assert not fatal(second)
    resources = desired(second)
    assert set(resources) == EXPECTED_KEYS | {"iam-binding"}
    binding = resources["iam-binding"]
    validate_against_model(binding)
    assert binding["spec"]["forProvider"] == {
        "project": "acme-inference",
        "role": "roles/container.admin",
        "member": "serviceAccount:mp-gke-us-central@acme-inference.iam.gserviceaccount.com",
    }
    status = to_plain(second.desired.composite.resource)["status"]
    assert status["network"] == {"name": "gke-us-central-net-x7k2p"}
    assert status["endpoint"] == "34.1.2.3"
    # Everything observed Ready is ready; the new binding is not yet.
    flags = ready(second)
    assert flags["iam-binding"] == fnv1.READY_FALSE
    assert all(flags[k] == fnv1.READY_TRUE for k in EXPECTED_KEYS)
    cond = condition(second, "ClusterReady")
    assert (cond.status, cond.reason) == (fnv1.STATUS_CONDITION_TRUE, "ClusterRunning")
    assert "iam-binding" in cond.message


def test_iam_binding_is_held_when_its_gate_closes_again():
    first = run(gke_xr())
    observed = all_observed(first)
    second = run(gke_xr(), observed)
    observed["iam-binding"] = observe("iam-binding", desired(second)["iam-binding"])
    # The service account's status is momentarily empty (e.g. the provider restarted).
    observed["service-account"]["status"].pop("atProvider")
    third = run(gke_xr(), observed)
    binding = desired(third)["iam-binding"]
    assert binding["spec"] == observed["iam-binding"]["spec"]
    assert binding["metadata"]["name"] == observed["iam-binding"]["metadata"]["name"]
    assert "status" not in binding and "uid" not in binding["metadata"]


def test_invalid_input_holds_every_observed_resource_and_names_the_field():
    first = run(gke_xr())
    observed = all_observed(first)
    observed["cluster"]["metadata"]["annotations"]["crossplane.io/external-name"] = "mp-gke-us"
    broken = gke_xr()
    # A GPU pool without its gpu block (the XRD's CEL would refuse it; render would not).
    del broken["spec"]["nodePools"][1]["gpu"]
    broken["status"] = {"network": {"name": "gke-us-central-net-x7k2p"}}
    rsp = run(broken, observed)
    assert not fatal(rsp)
    resources = desired(rsp)
    assert set(resources) == set(observed)
    for key, body in resources.items():
        assert body["spec"] == observed[key]["spec"], key
        assert body["metadata"]["name"] == observed[key]["metadata"]["name"]
        assert "status" not in body
        validate_against_model(body)
    # The external name this function chose for the cluster survives the hold.
    annotations = resources["cluster"]["metadata"]["annotations"]
    assert annotations["crossplane.io/external-name"] == "mp-gke-us"
    cond = condition(rsp, "ClusterReady")
    assert (cond.status, cond.reason) == (fnv1.STATUS_CONDITION_FALSE, "InvalidSpec")
    assert "spec.nodePools[1].gpu" in cond.message
    warnings = [r for r in rsp.results if r.severity == fnv1.SEVERITY_WARNING]
    assert warnings and "spec.nodePools[1].gpu" in warnings[0].message
    assert rsp.desired.composite.ready == fnv1.READY_FALSE
    # The status already published stays.
    assert to_plain(rsp.desired.composite.resource)["status"] == broken["status"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["nodePools"][0].update(zones=["europe-west4-a"]), "spec.nodePools[0].zones"),
        (lambda s: s["nodePools"][0].update(name="system"), "spec.nodePools[0].name"),
        (lambda s: s["nodePools"][1].update(nodeCount=5), "spec.nodePools[1].nodeCount"),
        (lambda s: s["nodePools"][0].update(machineType=""), "spec.nodePools[0].machineType"),
    ],
)
def test_each_invalid_pool_holds_instead_of_composing(change, field):
    observed = all_observed(run(gke_xr()))
    xr = gke_xr()
    change(xr["spec"])
    rsp = run(xr, observed)
    assert set(desired(rsp)) == set(observed)
    cond = condition(rsp, "ClusterReady")
    assert cond.reason == "InvalidSpec" and field in cond.message


def test_invalid_first_pass_composes_nothing():
    xr = gke_xr()
    xr["spec"]["nodePools"][0]["zones"] = ["us-east1-b"]
    rsp = run(xr)
    assert desired(rsp) == {}
    assert condition(rsp, "ClusterReady").reason == "InvalidSpec"


def test_service_account_id_fits_gcp_rules_for_long_and_dotted_names():
    name = "production.inference-cluster-us-central1-primary-east"
    xr = gke_xr()
    xr["metadata"]["name"] = name
    resources = desired(run(xr))
    sa_id = resources["service-account"]["metadata"]["annotations"]["crossplane.io/external-name"]
    assert 6 <= len(sa_id) <= 30
    assert sa_id[0].isalpha() and all(c.isalnum() or c == "-" for c in sa_id)
    cluster_id = resources["cluster"]["metadata"]["annotations"]["crossplane.io/external-name"]
    assert len(cluster_id) <= 40 and "." not in cluster_id and cluster_id[0].isalpha()


def test_system_role_pool_has_no_gpu_labels_and_may_omit_zones():
    xr = gke_xr()
    xr["spec"]["nodePools"].append(
        {"name": "cpu", "role": "System", "machineType": "n2-standard-8"}
    )
    resources = desired(run(xr))
    cpu = resources["nodepool-cpu"]["spec"]["forProvider"]
    assert cpu["nodeConfig"]["labels"] == {"modelplane.ai/pool": "cpu"}
    assert "guestAccelerator" not in cpu["nodeConfig"]
    assert "nodeLocations" not in cpu


def test_status_fields_unknown_to_the_model_never_block_composition():
    xr = gke_xr()
    xr["status"] = {
        "conditions": [{"type": "Ready", "status": "False"}],
        "crossplane": {"somethingNew": True},
        "secrets": [{"type": "Kubeconfig", "name": KUBECONFIG, "key": "kubeconfig"}],
    }
    rsp = run(xr)
    assert set(desired(rsp)) == EXPECTED_KEYS
    assert condition(rsp, "ClusterReady").reason == "Provisioning"


def test_a_pool_created_with_gkes_own_driver_keeps_it():
    """GCP cannot switch an existing pool's driver installation; recomposing it as GKE's DRA
    guide says would leave the NodePool refused by the provider. It keeps what it runs."""
    first = desired(run(gke_xr()))
    legacy = copy.deepcopy(first["nodepool-l4"])
    legacy_config = legacy["spec"]["forProvider"]["nodeConfig"]
    legacy_config["guestAccelerator"][0]["gpuDriverInstallationConfig"] = {
        "gpuDriverVersion": "DEFAULT"
    }
    for label in ("gke-no-default-nvidia-gpu-device-plugin", "nvidia.com/gpu.present"):
        del legacy_config["labels"][label]

    resources = desired(run(gke_xr(), {"nodepool-l4": legacy}))
    assert resources["nodepool-l4"]["spec"]["forProvider"] == legacy["spec"]["forProvider"]
    # A pool observed without GKE's driver, and a new pool, follow the guide.
    h100 = resources["nodepool-h100"]["spec"]["forProvider"]["nodeConfig"]
    assert h100["guestAccelerator"][0]["gpuDriverInstallationConfig"] == {
        "gpuDriverVersion": "INSTALLATION_DISABLED"
    }
    assert h100["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
