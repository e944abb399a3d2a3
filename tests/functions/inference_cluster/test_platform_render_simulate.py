"""The platform through the CLI: `modelplane render` of gateways, clusters and a stack, and
`modelplane simulate` of examples/platform converging with every resource Ready."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from modelplane import generate, repo
from modelplane.main import cli
from modelplane.validation import validate_object

EXAMPLES = repo.root() / "examples" / "platform"
ANNOTATION = "crossplane.io/composition-resource-name"
(GATEWAY_BUNDLE,) = (b for b in generate.BUNDLES if "gateway-api-standard" in b.target)
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "ownerReferences")


def render(xr: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["render", str(xr), "-r", *args])
    assert result.exit_code == 0, result.output
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_key(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["annotations"][ANNOTATION]: d for d in docs[1:] if d["kind"] != "Result"}


def conditions(xr: dict) -> dict[str, dict]:
    return {c["type"]: c for c in xr["status"]["conditions"]}


def write(path: Path, docs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def observed(key: str, body: dict, status: dict) -> dict:
    """``body`` as the API server would return it after a provider wrote ``status``."""
    metadata = {k: v for k, v in body["metadata"].items() if k != "ownerReferences"}
    metadata["annotations"] = {**metadata.get("annotations", {}), ANNOTATION: key}
    return {**body, "metadata": metadata, "status": status}


READY = {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}


def test_render_gateway_first_pass_and_once_traefik_is_ready(tmp_path):
    docs = render(EXAMPLES / "inferencegateway.yaml")
    first = by_key(docs)
    assert {"provider-config-helm", "namespace-metallb"} <= set(first)
    # Every CRD of the committed Gateway API bundle (D1: the whole standard channel).
    bundle = json.loads((repo.root() / GATEWAY_BUNDLE.target).read_text())
    assert {k for k in first if k.startswith("gateway-api-crd-")} == {
        f"gateway-api-crd-{crd['spec']['names']['plural']}" for crd in bundle
    }
    assert conditions(docs[0])["ControllerReady"]["reason"] == "Installing"

    established = {"conditions": [{"type": "Established", "status": "True", "reason": "Ok"}]}
    world = [
        observed(k, v, established if v["kind"] == "CustomResourceDefinition" else READY)
        for k, v in first.items()
    ]
    second = by_key(render(EXAMPLES / "inferencegateway.yaml", "-o",
                           str(write(tmp_path / "o1.yaml", world))))  # fmt: skip
    assert {"traefik", "metallb", "usage-pc-by-traefik", "usage-pc-by-metallb"} <= set(second)
    world += [observed(k, second[k], READY) for k in ("traefik", "metallb")]
    docs = render(EXAMPLES / "inferencegateway.yaml", "-o", str(write(tmp_path / "o2.yaml", world)))
    third = by_key(docs)
    assert third["gateway"]["spec"]["listeners"][0]["port"] == 8000
    assert third["gateway-class"]["spec"]["controllerName"] == "traefik.io/gateway-controller"
    assert third["metallb-pool"]["spec"]["addresses"] == ["172.18.255.200-172.18.255.250"]
    assert conditions(docs[0])["ControllerReady"]["reason"] == "ControllerHealthy"
    for body in third.values():
        clean = {**body, "metadata": {k: v for k, v in body["metadata"].items()
                                      if k not in SERVER_METADATA}}  # fmt: skip
        assert validate_object(clean) == [], body["kind"]


def test_render_gke_cluster_with_its_classes():
    docs = render(EXAMPLES / "inferencecluster-gke.yaml", "-e", str(EXAMPLES))
    xr, resources = docs[0], by_key(docs)
    assert set(resources) == {"gke-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    assert resources["gke-cluster"]["spec"]["nodePools"][0]["machineType"] == "g2-standard-8"
    assert xr["status"]["gpuPools"][0] | {"devices": None} == {
        "name": "l4", "nodes": 1, "maxNodes": 4, "devices": None
    }  # fmt: skip
    assert conditions(xr)["ClusterReady"]["reason"] == "Provisioning"


def test_render_cluster_whose_class_is_missing(tmp_path):
    only_l4 = write(tmp_path / "classes.yaml", [yaml.safe_load(
        (EXAMPLES / "inferenceclass-l4.yaml").read_text())])  # fmt: skip
    docs = render(EXAMPLES / "inferencecluster-existing.yaml", "-e", str(only_l4))
    # An Existing cluster connects anyway: only the pool of the missing class is held back.
    assert set(by_key(docs)) == {
        "cluster-provider-config-kubernetes", "serving-stack", "capacity-summary", "cache-summary",
        "usage-replicas",
    }  # fmt: skip
    pools = conditions(docs[0])["PoolsResolved"]
    assert (pools["status"], pools["reason"]) == ("False", "InvalidNodePool")
    assert pools["message"].startswith(
        "pool h100 (class h100-8x-byo): InferenceClass h100-8x-byo not found"
    )
    assert docs[0]["status"]["gpuPools"] == []


def test_render_existing_cluster():
    docs = render(EXAMPLES / "inferencecluster-existing.yaml", "-e", str(EXAMPLES))
    resources = by_key(docs)
    assert set(resources) == {
        "cluster-provider-config-kubernetes", "serving-stack", "capacity-summary", "cache-summary",
        "usage-replicas",
    }  # fmt: skip
    assert docs[0]["status"]["providerConfigRef"]["name"].startswith("lab-h100-cluster-kubeconfig-")
    assert docs[0]["status"]["gpuPools"][0]["devices"][0]["count"] == 8


def test_render_eks_cluster(tmp_path):
    accelerator = {"type": "nvidia-l4", "count": 1}
    eks_class = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "eks-l4"},
        "spec": {
            "provisioning": {
                "provider": "EKS",
                "eks": {"instanceType": "g6.xlarge", "accelerator": accelerator},
            },
            "devices": [
                {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"}
            ],
        },
    }
    cluster = {
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": "eks-us-east"},
        "spec": {"cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                 "nodePools": [{"name": "l4", "className": "eks-l4", "zones": ["us-east-1a"]}]},
    }  # fmt: skip
    docs = render(write(tmp_path / "ic.yaml", [cluster]), "-e",
                  str(write(tmp_path / "c.yaml", [eks_class])))  # fmt: skip
    eks = by_key(docs)["eks-cluster"]
    assert eks["kind"] == "EKSCluster"
    assert eks["spec"]["nodePools"][0]["instanceType"] == "g6.xlarge"


def test_render_serving_stack_pipeline_adds_provider_config_usages(tmp_path):
    stack = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "ServingStack",
        "metadata": {"name": "lab-stack", "namespace": "modelplane-system"},
        "spec": {"secrets": [{"type": "Kubeconfig", "name": "k", "key": "kubeconfig"}]},
    }  # fmt: skip
    xr = write(tmp_path / "ss.yaml", [stack])
    first = by_key(render(xr))
    world = [observed(k, v, {}) for k, v in first.items()]
    resources = by_key(render(xr, "-o", str(write(tmp_path / "o.yaml", world))))
    consumers = [k for k, v in resources.items() if v["kind"] in ("Release", "Object")]
    assert len(consumers) == 15
    for key in consumers:
        assert resources[f"usage-pc-{key}"]["spec"]["by"]["resourceSelector"]["matchLabels"] == {
            "modelplane.ai/usage-consumer": key
        }


@pytest.mark.timeout(600)
def test_simulate_example_platform_converges_with_gpu_pools_published():
    result = CliRunner().invoke(cli, ["simulate", "-o", "yaml", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if isinstance(doc, dict)]
    clusters = {o["metadata"]["name"]: o for o in objects if o["kind"] == "InferenceCluster"}
    assert set(clusters) == {"gke-us-central", "lab-h100"}
    for xr in clusters.values():
        assert conditions(xr)["Ready"]["status"] == "True"
        assert xr["status"]["gateway"]["address"]
        assert xr["status"]["providerConfigRef"]["name"]
    assert [(p["name"], p["nodes"], p.get("maxNodes")) for p in (
        clusters["gke-us-central"]["status"]["gpuPools"])] == [("l4", 1, 4)]  # fmt: skip
    assert [(p["name"], p["nodes"]) for p in clusters["lab-h100"]["status"]["gpuPools"]] == [
        ("h100", 2)
    ]
    (gateway,) = [o for o in objects if o["kind"] == "InferenceGateway"]
    assert conditions(gateway)["Ready"]["status"] == "True"
    assert gateway["status"]["address"]
    kinds = {(o["kind"], o["metadata"].get("namespace")) for o in objects}
    assert ("ServingStack", "modelplane-system") in kinds
    # Every resource converged: each one that reports Ready (XRs, Releases, Objects, Usages,
    # managed resources) is Ready.
    reporting = [
        o for o in objects
        if any(c["type"] == "Ready" for c in (o.get("status") or {}).get("conditions") or [])
    ]  # fmt: skip
    assert {o["kind"] for o in reporting} >= {"ServingStack", "Release", "Object", "Usage"}
    not_ready = [(o["kind"], o["metadata"]["name"]) for o in reporting
                 if conditions(o)["Ready"]["status"] != "True"]  # fmt: skip
    assert not_ready == []
    assert ("ClusterUsage", None) in kinds


def test_render_default_gateway_has_no_metallb(tmp_path):
    gateway = yaml.safe_load((EXAMPLES / "inferencegateway.yaml").read_text())
    gateway["spec"] = {"backend": "Traefik"}
    resources = by_key(render(write(tmp_path / "ig.yaml", [gateway])))
    assert "provider-config-helm" in resources
    assert not any("metallb" in key for key in resources)


H100_CLASS = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "gke-h100-8x-a3"},
    "spec": {
        "provisioning": {
            "provider": "GKE",
            "gke": {
                "machineType": "a3-highgpu-8g",
                "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
            },
        },
        "devices": [
            {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
             "count": 8, "capacity": {"memory": {"value": "81559Mi"}}}
        ],
    },
}  # fmt: skip


def test_render_gke_cluster_with_l4_and_h100_pools_and_its_usages(tmp_path):
    cluster = yaml.safe_load((EXAMPLES / "inferencecluster-gke.yaml").read_text())
    cluster["spec"]["nodePools"].append(
        {"name": "h100", "className": "gke-h100-8x-a3", "nodeCount": 2,
         "zones": ["us-central1-b"]}
    )  # fmt: skip
    xr = write(tmp_path / "ic.yaml", [cluster])
    classes = write(
        tmp_path / "classes.yaml",
        [yaml.safe_load((EXAMPLES / "inferenceclass-l4.yaml").read_text()), H100_CLASS],
    )
    gke = by_key(render(xr, "-e", str(classes)))["gke-cluster"]
    assert [p["name"] for p in gke["spec"]["nodePools"]] == ["l4", "h100"]
    secrets = [
        {"type": "Kubeconfig", "name": "gke-kubeconfig", "key": "kubeconfig"},
        {"type": "GCPServiceAccountKey", "name": "gke-sa-key", "key": "private_key"},
    ]
    status = {**READY, "secrets": secrets, "network": {"name": "vpc-abc12"}}
    world = write(tmp_path / "observed.yaml", [observed("gke-cluster", gke, status)])
    docs = render(xr, "-e", str(classes), "-o", str(world))
    resources = by_key(docs)
    assert set(resources) == {
        "gke-cluster", "usage-replicas", "cluster-provider-config-kubernetes", "storage-class-rwx",
        "serving-stack", "usage-gke-by-backend", "capacity-summary", "cache-summary",
    }  # fmt: skip
    assert resources["usage-gke-by-backend"]["spec"]["by"]["kind"] == "ServingStack"
    pools = {p["name"]: p for p in docs[0]["status"]["gpuPools"]}
    assert (pools["h100"]["nodes"], pools["h100"]["devices"][0]["count"]) == (2, 8)
    assert "maxNodes" not in pools["h100"]
