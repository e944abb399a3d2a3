"""compose-eks-cluster through real gRPC: VPC and subnets per AZ, IAM, the cluster and its
kubeconfig, the system node group and a GPU node group, readiness, and hold-on-invalid."""

from __future__ import annotations

import copy
import json

import pytest
from compose_eks_cluster.fn import EKSClusterFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.naming import child_name
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function
from modelplane_common.testing import validate_against_model
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.ekscluster import (
    EKSCluster,
)

NS = "modelplane-system"
NAME = "eks-us-east"
KUBECONFIG = child_name(NAME, "kubeconfig")
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]


def eks_xr() -> dict:
    xr = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "EKSCluster",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "region": "us-east-1",
            "kubernetesVersion": "1.36",
            "nodePools": [
                {
                    "name": "l4",
                    "role": "GPU",
                    "instanceType": "g6.12xlarge",
                    "diskSizeGb": 300,
                    "nodeCount": 2,
                    "maxNodeCount": 4,
                    "gpu": {"acceleratorType": "nvidia-l4"},
                    "zones": ["us-east-1a", "us-east-1c"],
                }
            ],
        },
    }
    EKSCluster.model_validate(xr)
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
    return run_function(EKSClusterFunction(), request)


def desired(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    return {key: to_plain(r.resource) for key, r in rsp.desired.resources.items()}


def condition(rsp: fnv1.RunFunctionResponse, type_: str) -> fnv1.Condition:
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found


def observe(key: str, body: dict) -> dict:
    out = copy.deepcopy(body)
    metadata = out.setdefault("metadata", {})
    metadata.setdefault("name", f"{NAME}-{key}-q8w3e")
    metadata["uid"] = f"uid-{key}"
    annotations = metadata.setdefault("annotations", {})
    annotations["crossplane.io/composition-resource-name"] = key
    annotations["crossplane.io/external-name"] = f"aws-id-{key}"
    out["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Available",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    return out


EXPECTED_KEYS = {
    "vpc",
    "subnet-0",
    "subnet-1",
    "subnet-2",
    "internet-gateway",
    "route-table",
    "route-default",
    "route-table-association-0",
    "route-table-association-1",
    "route-table-association-2",
    "iam-role-cluster",
    "iam-attach-cluster-policy",
    "iam-role-node",
    "iam-attach-node-worker",
    "iam-attach-node-cni",
    "iam-attach-node-ecr",
    "cluster",
    "cluster-auth",
    "nodegroup-system",
    "nodegroup-l4",
    "addon-vpc-cni",
    "addon-kube-proxy",
    "addon-coredns",
    "provider-config-kubernetes",
    "provider-config-helm",
}


def test_eks_cluster_with_a_gpu_node_group_composes_everything_and_validates():
    rsp = run(eks_xr())
    assert not [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    resources = desired(rsp)
    assert set(resources) == EXPECTED_KEYS
    for key, body in resources.items():
        validate_against_model(body)
        if body["apiVersion"].startswith(("ec2.", "eks.")):
            assert body["spec"]["forProvider"]["region"] == "us-east-1", key
        if body["apiVersion"].endswith("upbound.io/v1beta1"):
            assert "providerConfigRef" not in body["spec"]

    gpu = resources["nodegroup-l4"]["spec"]["forProvider"]
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu["instanceTypes"] == ["g6.12xlarge"]
    assert gpu["diskSize"] == 300
    assert gpu["scalingConfig"] == {"desiredSize": 2, "minSize": 0, "maxSize": 4}
    assert gpu["labels"] == {"modelplane.ai/pool": "l4", "modelplane.ai/gpu": "nvidia-l4"}
    assert gpu["taint"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    # The pool's zones pick the subnets by the names those subnets are given.
    assert gpu["subnetIdRefs"] == [
        {"name": child_name(NAME, "subnet-us-east-1a")},
        {"name": child_name(NAME, "subnet-us-east-1c")},
    ]
    subnet_names = {resources[f"subnet-{i}"]["metadata"]["name"] for i in range(3)}
    assert {ref["name"] for ref in gpu["subnetIdRefs"]} <= subnet_names
    assert gpu["clusterNameSelector"] == {"matchControllerRef": True}
    assert gpu["nodeRoleArnSelector"] == {
        "matchControllerRef": True,
        "matchLabels": {"modelplane.ai/iam-role": "node"},
    }

    system = resources["nodegroup-system"]["spec"]["forProvider"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["instanceTypes"] == ["m6i.xlarge"]
    assert system["scalingConfig"] == {"desiredSize": 1, "minSize": 1, "maxSize": 2}
    assert system["labels"] == {"modelplane.ai/pool": "system"}
    assert system["subnetIdSelector"] == {"matchControllerRef": True}
    assert "taint" not in system


def test_network_is_one_public_subnet_per_derived_az():
    resources = desired(run(eks_xr()))
    assert resources["vpc"]["spec"]["forProvider"]["cidrBlock"] == "10.0.0.0/16"
    cidrs = ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"]
    for index, (az, cidr) in enumerate(zip(AZS, cidrs, strict=True)):
        subnet = resources[f"subnet-{index}"]
        assert subnet["metadata"]["labels"] == {"modelplane.ai/zone": az}
        fp = subnet["spec"]["forProvider"]
        assert (fp["availabilityZone"], fp["cidrBlock"]) == (az, cidr)
        assert fp["mapPublicIpOnLaunch"] is True
        assoc = resources[f"route-table-association-{index}"]["spec"]["forProvider"]
        assert assoc["subnetIdSelector"] == {
            "matchControllerRef": True,
            "matchLabels": {"modelplane.ai/zone": az},
        }
    route = resources["route-default"]["spec"]["forProvider"]
    assert route["destinationCidrBlock"] == "0.0.0.0/0"
    assert route["gatewayIdSelector"] == {"matchControllerRef": True}


def test_iam_cluster_and_kubeconfig():
    resources = desired(run(eks_xr()))
    trust = json.loads(resources["iam-role-cluster"]["spec"]["forProvider"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "eks.amazonaws.com"}
    assert trust["Statement"][0]["Action"] == "sts:AssumeRole"
    node_trust = json.loads(resources["iam-role-node"]["spec"]["forProvider"]["assumeRolePolicy"])
    assert node_trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    policies = {
        key: resources[key]["spec"]["forProvider"]["policyArn"].rsplit("/", 1)[1]
        for key in resources
        if key.startswith("iam-attach-")
    }
    assert policies == {
        "iam-attach-cluster-policy": "AmazonEKSClusterPolicy",
        "iam-attach-node-worker": "AmazonEKSWorkerNodePolicy",
        "iam-attach-node-cni": "AmazonEKS_CNI_Policy",
        "iam-attach-node-ecr": "AmazonEC2ContainerRegistryReadOnly",
    }

    cluster = resources["cluster"]["spec"]["forProvider"]
    assert cluster["version"] == "1.36"
    assert cluster["accessConfig"] == {
        "authenticationMode": "API_AND_CONFIG_MAP",
        "bootstrapClusterCreatorAdminPermissions": True,
    }
    assert cluster["vpcConfig"]["subnetIdSelector"] == {"matchControllerRef": True}
    auth = resources["cluster-auth"]["spec"]
    assert auth["writeConnectionSecretToRef"] == {"name": KUBECONFIG}
    for key in ("provider-config-kubernetes", "provider-config-helm"):
        pc = resources[key]
        assert pc["metadata"]["name"] == KUBECONFIG
        assert pc["spec"] == {
            "credentials": {
                "source": "Secret",
                "secretRef": {"name": KUBECONFIG, "namespace": NS, "key": "kubeconfig"},
            }
        }
    addons = {resources[k]["spec"]["forProvider"]["addonName"] for k in resources if "addon" in k}
    assert addons == {"vpc-cni", "kube-proxy", "coredns"}


def test_status_and_readiness_follow_observed_resources():
    first = run(eks_xr())
    assert to_plain(first.desired.composite.resource)["status"] == {
        "secrets": [{"type": "Kubeconfig", "name": KUBECONFIG, "key": "kubeconfig"}]
    }
    assert condition(first, "ClusterReady").reason == "Provisioning"

    observed = {key: observe(key, body) for key, body in desired(first).items()}
    observed["cluster"]["status"]["atProvider"] = {"endpoint": "https://ABC.eks.amazonaws.com"}
    second = run(eks_xr(), observed)
    assert all(r.ready == fnv1.READY_TRUE for r in second.desired.resources.values())
    status = to_plain(second.desired.composite.resource)["status"]
    assert status["endpoint"] == "https://ABC.eks.amazonaws.com"
    cond = condition(second, "ClusterReady")
    assert (cond.status, cond.reason) == (fnv1.STATUS_CONDITION_TRUE, "ClusterRunning")


def test_invalid_input_holds_every_observed_resource():
    observed = {key: observe(key, body) for key, body in desired(run(eks_xr())).items()}
    xr = eks_xr()
    # us-east-1d has no subnet: composing would leave the node group without one.
    xr["spec"]["nodePools"][0]["zones"] = ["us-east-1d"]
    rsp = run(xr, observed)
    resources = desired(rsp)
    assert set(resources) == set(observed)
    for key, body in resources.items():
        assert body["spec"] == observed[key]["spec"]
        assert body["metadata"]["name"] == observed[key]["metadata"]["name"]
        assert "status" not in body
    # Cloud IDs (vpc-..., subnet-...) are the provider's; a hold never claims them.
    assert "crossplane.io/external-name" not in resources["vpc"]["metadata"].get("annotations", {})
    cond = condition(rsp, "ClusterReady")
    assert cond.reason == "InvalidSpec" and "spec.nodePools[0].zones" in cond.message
    assert "us-east-1a" in cond.message
    assert rsp.desired.composite.ready == fnv1.READY_FALSE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p.pop("gpu"), "spec.nodePools[0].gpu"),
        (lambda p: p.pop("zones"), "spec.nodePools[0].zones"),
        (lambda p: p.update(minNodeCount=3), "spec.nodePools[0].minNodeCount"),
        (lambda p: p.update(diskSizeGb=5), "spec.nodePools[0].diskSizeGb"),
    ],
)
def test_invalid_pool_holds(change, field):
    observed = {key: observe(key, body) for key, body in desired(run(eks_xr())).items()}
    xr = eks_xr()
    change(xr["spec"]["nodePools"][0])
    rsp = run(xr, observed)
    assert set(desired(rsp)) == set(observed)
    assert field in condition(rsp, "ClusterReady").message


def test_removing_a_pool_deletes_only_its_node_group():
    observed = {key: observe(key, body) for key, body in desired(run(eks_xr())).items()}
    xr = eks_xr()
    xr["spec"]["nodePools"][0]["name"] = "l4-big"
    resources = desired(run(xr, observed))
    assert "nodegroup-l4" not in resources and "nodegroup-l4-big" in resources
    assert set(resources) == (set(observed) - {"nodegroup-l4"}) | {"nodegroup-l4-big"}
