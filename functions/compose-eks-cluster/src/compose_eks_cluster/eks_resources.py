"""Manifests of the AWS managed resources behind one EKSCluster (platform spec §6.2).

Pure functions of the validated XR spec: each returns a manifest dict that has been checked
against the generated model of its provider CRD. No ``providerConfigRef`` is set, so every
managed resource uses the operator's default ``ClusterProviderConfig``.
"""

from __future__ import annotations

import json
import string

from modelplane_common.managed import validated
from modelplane_common.naming import child_name
from modelplane_common.node_pools import zone_names
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import SecretKey, kubeconfig_provider_configs
from modelplane_schemas.generated.ec2_aws_m_upbound_io.v1beta1 import (
    internetgateway,
    route,
    routetable,
    routetableassociation,
    subnet,
    vpc,
)
from modelplane_schemas.generated.eks_aws_m_upbound_io.v1beta1 import (
    addon,
    cluster,
    clusterauth,
    nodegroup,
)
from modelplane_schemas.generated.iam_aws_m_upbound_io.v1beta1 import role, rolepolicyattachment
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.ekscluster import (
    NodePool,
    Spec,
)

EC2 = "ec2.aws.m.upbound.io/v1beta1"
IAM = "iam.aws.m.upbound.io/v1beta1"
EKS = "eks.aws.m.upbound.io/v1beta1"

POOL_LABEL = "modelplane.ai/pool"
GPU_LABEL = "modelplane.ai/gpu"
ZONE_LABEL = "modelplane.ai/zone"
ROLE_LABEL = "modelplane.ai/iam-role"
SYSTEM_POOL = "system"
KUBECONFIG_KEY = "kubeconfig"
# AWS's DRA guide: this AMI has the NVIDIA driver at / and labels nodes nvidia.com/gpu.present;
# it ships no device plugin (none may run beside the DRA driver), so nothing to switch off.
GPU_AMI = "AL2023_x86_64_NVIDIA"
STANDARD_AMI = "AL2023_x86_64_STANDARD"
MATCH_CONTROLLER = {"matchControllerRef": True}
ADDONS = ("vpc-cni", "kube-proxy", "coredns")
CLUSTER_POLICIES = {"iam-attach-cluster-policy": "AmazonEKSClusterPolicy"}
NODE_POLICIES = {
    "iam-attach-node-worker": "AmazonEKSWorkerNodePolicy",
    "iam-attach-node-cni": "AmazonEKS_CNI_Policy",
    "iam-attach-node-ecr": "AmazonEC2ContainerRegistryReadOnly",
}


def availability_zones(spec: Spec) -> list[str]:
    """Subnet i lives in <region> followed by the i-th letter: us-east-1a, us-east-1b..."""
    cidrs = _subnet_cidrs(spec)
    return [f"{spec.region}{string.ascii_lowercase[i]}" for i in range(len(cidrs))]


def _subnet_cidrs(spec: Spec) -> list[str]:
    assert spec.networking is not None and spec.networking.subnetCidrs  # XRD defaults
    return [getattr(cidr, "root", cidr) for cidr in spec.networking.subnetCidrs]


def kubeconfig_secret(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def provider_config_name(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def subnet_name(xr_name: str, zone: str) -> str:
    return child_name(xr_name, f"subnet-{zone}")


def _role_selector(role_label: str) -> JSON:
    return {"matchControllerRef": True, "matchLabels": {ROLE_LABEL: role_label}}


def vpc_manifest(spec: Spec) -> JSON:
    assert spec.networking is not None
    return validated(
        vpc.VPC,
        {
            "apiVersion": EC2,
            "kind": "VPC",
            "spec": {
                "forProvider": {
                    "region": spec.region,
                    "cidrBlock": spec.networking.vpcCidr,
                    "enableDnsHostnames": True,
                    "enableDnsSupport": True,
                }
            },
        },
    )


def subnet_manifests(xr_name: str, spec: Spec) -> dict[str, JSON]:
    """``subnet-<i>``: one public subnet per AZ, named so node groups can reference them."""
    out = {}
    for index, (zone, cidr) in enumerate(
        zip(availability_zones(spec), _subnet_cidrs(spec), strict=True)
    ):
        out[f"subnet-{index}"] = validated(
            subnet.Subnet,
            {
                "apiVersion": EC2,
                "kind": "Subnet",
                "metadata": {"name": subnet_name(xr_name, zone), "labels": {ZONE_LABEL: zone}},
                "spec": {
                    "forProvider": {
                        "region": spec.region,
                        "availabilityZone": zone,
                        "cidrBlock": cidr,
                        "mapPublicIpOnLaunch": True,
                        "vpcIdSelector": MATCH_CONTROLLER,
                        # Where the workload Gateway's LoadBalancer Service gets its ELB.
                        "tags": {"kubernetes.io/role/elb": "1"},
                    }
                },
            },
        )
    return out


def internet_gateway_manifest(spec: Spec) -> JSON:
    return validated(
        internetgateway.InternetGateway,
        {
            "apiVersion": EC2,
            "kind": "InternetGateway",
            "spec": {"forProvider": {"region": spec.region, "vpcIdSelector": MATCH_CONTROLLER}},
        },
    )


def route_table_manifest(spec: Spec) -> JSON:
    return validated(
        routetable.RouteTable,
        {
            "apiVersion": EC2,
            "kind": "RouteTable",
            "spec": {"forProvider": {"region": spec.region, "vpcIdSelector": MATCH_CONTROLLER}},
        },
    )


def default_route_manifest(spec: Spec) -> JSON:
    return validated(
        route.Route,
        {
            "apiVersion": EC2,
            "kind": "Route",
            "spec": {
                "forProvider": {
                    "region": spec.region,
                    "destinationCidrBlock": "0.0.0.0/0",
                    "gatewayIdSelector": MATCH_CONTROLLER,
                    "routeTableIdSelector": MATCH_CONTROLLER,
                }
            },
        },
    )


def route_table_association_manifests(spec: Spec) -> dict[str, JSON]:
    return {
        f"route-table-association-{index}": validated(
            routetableassociation.RouteTableAssociation,
            {
                "apiVersion": EC2,
                "kind": "RouteTableAssociation",
                "spec": {
                    "forProvider": {
                        "region": spec.region,
                        "routeTableIdSelector": MATCH_CONTROLLER,
                        "subnetIdSelector": {
                            "matchControllerRef": True,
                            "matchLabels": {ZONE_LABEL: zone},
                        },
                    }
                },
            },
        )
        for index, zone in enumerate(availability_zones(spec))
    }


def _trust_policy(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sts:AssumeRole",
                }
            ],
        },
        separators=(",", ":"),
    )


def role_manifest(role_label: str, service: str) -> JSON:
    return validated(
        role.Role,
        {
            "apiVersion": IAM,
            "kind": "Role",
            "metadata": {"labels": {ROLE_LABEL: role_label}},
            "spec": {"forProvider": {"assumeRolePolicy": _trust_policy(service)}},
        },
    )


def policy_attachment_manifest(role_label: str, policy: str) -> JSON:
    return validated(
        rolepolicyattachment.RolePolicyAttachment,
        {
            "apiVersion": IAM,
            "kind": "RolePolicyAttachment",
            "spec": {
                "forProvider": {
                    "policyArn": f"arn:aws:iam::aws:policy/{policy}",
                    "roleSelector": _role_selector(role_label),
                }
            },
        },
    )


def iam_manifests() -> dict[str, JSON]:
    out = {"iam-role-cluster": role_manifest("cluster", "eks.amazonaws.com")}
    out |= {key: policy_attachment_manifest("cluster", p) for key, p in CLUSTER_POLICIES.items()}
    out["iam-role-node"] = role_manifest("node", "ec2.amazonaws.com")
    out |= {key: policy_attachment_manifest("node", p) for key, p in NODE_POLICIES.items()}
    return out


def cluster_manifest(spec: Spec) -> JSON:
    return validated(
        cluster.Cluster,
        {
            "apiVersion": EKS,
            "kind": "Cluster",
            "spec": {
                "forProvider": {
                    "region": spec.region,
                    "version": spec.kubernetesVersion,
                    "roleArnSelector": _role_selector("cluster"),
                    # The creator (the AWS provider's principal) becomes cluster-admin, so the
                    # ClusterAuth kubeconfig alone reaches the cluster.
                    "accessConfig": {
                        "authenticationMode": "API_AND_CONFIG_MAP",
                        "bootstrapClusterCreatorAdminPermissions": True,
                    },
                    "vpcConfig": {
                        "endpointPrivateAccess": True,
                        "endpointPublicAccess": True,
                        "subnetIdSelector": MATCH_CONTROLLER,
                    },
                }
            },
        },
    )


def cluster_auth_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        clusterauth.ClusterAuth,
        {
            "apiVersion": EKS,
            "kind": "ClusterAuth",
            "spec": {
                "forProvider": {"region": spec.region, "clusterNameSelector": MATCH_CONTROLLER},
                "writeConnectionSecretToRef": {"name": kubeconfig_secret(xr_name)},
            },
        },
    )


def _node_group(spec: Spec, for_provider: JSON) -> JSON:
    base = {
        "region": spec.region,
        "clusterNameSelector": MATCH_CONTROLLER,
        "nodeRoleArnSelector": _role_selector("node"),
    }
    return validated(
        nodegroup.NodeGroup,
        {"apiVersion": EKS, "kind": "NodeGroup", "spec": {"forProvider": base | for_provider}},
    )


def system_node_group_manifest(spec: Spec) -> JSON:
    return _node_group(
        spec,
        {
            "amiType": STANDARD_AMI,
            "instanceTypes": ["m6i.xlarge"],
            "scalingConfig": {"desiredSize": 1, "minSize": 1, "maxSize": 2},
            "labels": {POOL_LABEL: SYSTEM_POOL},
            "subnetIdSelector": MATCH_CONTROLLER,
        },
    )


def pool_labels(pool: NodePool) -> dict[str, str]:
    labels = {POOL_LABEL: pool.name}
    if pool.role == "GPU" and pool.gpu is not None:
        labels[GPU_LABEL] = pool.gpu.acceleratorType
    return labels


def node_group_manifest(xr_name: str, spec: Spec, pool: NodePool) -> JSON:
    gpu = pool.role == "GPU"
    for_provider: JSON = {
        "amiType": GPU_AMI if gpu else STANDARD_AMI,
        "instanceTypes": [pool.instanceType],
        "diskSize": pool.diskSizeGb,
        "scalingConfig": {
            "desiredSize": pool.nodeCount,
            "minSize": pool.minNodeCount,
            "maxSize": pool.maxNodeCount,
        },
        "labels": pool_labels(pool),
    }
    if gpu:
        # Keeps everything but GPU workloads (which tolerate it) off the expensive nodes.
        for_provider["taint"] = [
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
        ]
    zones = zone_names(pool)
    if zones:
        for_provider["subnetIdRefs"] = [{"name": subnet_name(xr_name, zone)} for zone in zones]
    else:
        for_provider["subnetIdSelector"] = MATCH_CONTROLLER
    return _node_group(spec, for_provider)


def addon_manifests(spec: Spec) -> dict[str, JSON]:
    return {
        f"addon-{name}": validated(
            addon.Addon,
            {
                "apiVersion": EKS,
                "kind": "Addon",
                "spec": {
                    "forProvider": {
                        "region": spec.region,
                        "addonName": name,
                        "clusterNameSelector": MATCH_CONTROLLER,
                    }
                },
            },
        )
        for name in ADDONS
    }


def provider_config_manifests(xr_name: str, namespace: str) -> tuple[JSON, JSON]:
    """The kubernetes and helm ProviderConfigs for this cluster (spec §8)."""
    # The ClusterAuth kubeconfig carries a token the AWS provider refreshes: no identity.
    return kubeconfig_provider_configs(
        provider_config_name(xr_name),
        SecretKey(kubeconfig_secret(xr_name), namespace, KUBECONFIG_KEY),
    )


def status_secrets(xr_name: str) -> list[JSON]:
    return [{"type": "Kubeconfig", "name": kubeconfig_secret(xr_name), "key": KUBECONFIG_KEY}]
