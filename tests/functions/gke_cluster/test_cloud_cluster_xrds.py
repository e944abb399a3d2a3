"""The GKECluster and EKSCluster XRDs refuse bad input with messages naming the field, and
default what platform.md §5.1/§6.1 default (schema + CEL, evaluated as the API server would)."""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner
from modelplane import openapi, repo, xrd
from modelplane.main import cli

API = "infrastructure.modelplane.ai/v1alpha1"

GKE = {
    "spec": {
        "project": "acme-inference",
        "region": "us-central1",
        "nodePools": [
            {
                "name": "l4",
                "role": "GPU",
                "machineType": "g2-standard-8",
                "gpu": {"acceleratorType": "nvidia-l4"},
                "zones": ["us-central1-a"],
            }
        ],
    }
}
EKS = {
    "spec": {
        "region": "us-east-1",
        "nodePools": [
            {
                "name": "l4",
                "role": "GPU",
                "instanceType": "g6.xlarge",
                "gpu": {"acceleratorType": "nvidia-l4"},
                "zones": ["us-east-1b"],
            }
        ],
    }
}


def schema(kind: str) -> dict:
    definition = xrd.catalog().definition_for(API, kind)
    assert definition is not None and definition.namespaced
    return definition.schema(API)


def problems(kind: str, xr: dict) -> list[str]:
    s = schema(kind)
    return [f"{path}: {msg}" for path, msg in openapi.check_value(s, xrd.apply_defaults(s, xr))]


def test_defaults_match_the_spec():
    gke = xrd.apply_defaults(schema("GKECluster"), GKE)["spec"]
    assert gke["kubernetesVersion"] == "1.35"
    assert gke["networking"] == {
        "podCidr": "10.1.0.0/16",
        "serviceCidr": "10.2.0.0/16",
        "nodeCidr": "10.0.0.0/24",
    }
    pool = gke["nodePools"][0]
    assert (pool["diskSizeGb"], pool["nodeCount"], pool["minNodeCount"], pool["maxNodeCount"]) == (
        100,
        1,
        0,
        8,
    )
    assert pool["gpu"]["acceleratorCount"] == 1
    eks = xrd.apply_defaults(schema("EKSCluster"), EKS)["spec"]
    assert eks["kubernetesVersion"] == "1.36"
    assert eks["networking"] == {
        "vpcCidr": "10.0.0.0/16",
        "subnetCidrs": ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"],
    }


def test_valid_examples_pass():
    assert problems("GKECluster", GKE) == []
    assert problems("EKSCluster", EKS) == []
    result = CliRunner().invoke(cli, ["validate", str(repo.root() / "examples" / "cloud-clusters")])
    assert result.exit_code == 0, result.output


def _pool(base: dict, **changes: object) -> dict:
    xr = copy.deepcopy(base)
    pool = xr["spec"]["nodePools"][0]
    for key, value in changes.items():
        if value is None:
            pool.pop(key)
        else:
            pool[key] = value
    return xr


@pytest.mark.parametrize(
    ("kind", "xr", "expected"),
    [
        ("GKECluster", _pool(GKE, gpu=None), "gpu is required when role is GPU"),
        ("GKECluster", _pool(GKE, zones=None), "zones is required when role is GPU"),
        ("GKECluster", _pool(GKE, name="system"), "must not be system"),
        ("GKECluster", _pool(GKE, nodeCount=9), "must not exceed maxNodeCount"),
        ("GKECluster", _pool(GKE, minNodeCount=2), "minNodeCount must not exceed nodeCount"),
        ("GKECluster", _pool(GKE, zones=["us-east1-b"]), "zones must be zones of spec.region"),
        ("GKECluster", _pool(GKE, name="L4_pool"), "spec.nodePools[0].name"),
        ("EKSCluster", _pool(EKS, gpu=None), "gpu is required when role is GPU"),
        ("EKSCluster", _pool(EKS, zones=["us-east-1d"]), "AZs of the subnets"),
        ("EKSCluster", _pool(EKS, zones=["us-east-1"]), "AZs of the subnets"),
        ("EKSCluster", _pool(EKS, maxNodeCount=0), "must not exceed maxNodeCount"),
    ],
)
def test_bad_pools_are_refused_naming_the_field(kind: str, xr: dict, expected: str):
    found = problems(kind, xr)
    assert any(expected in problem for problem in found), found


def test_gke_project_length_and_duplicate_pool_names():
    xr = copy.deepcopy(GKE)
    xr["spec"]["project"] = "acme"
    xr["spec"]["nodePools"].append(copy.deepcopy(xr["spec"]["nodePools"][0]))
    found = problems("GKECluster", xr)
    assert any(p.startswith("spec.project") for p in found), found
    assert any("spec.nodePools[1]" in p and "uplicate" in p for p in found), found


def test_eks_azs_follow_the_number_of_subnets():
    xr = _pool(EKS, zones=["us-east-1d"])
    xr["spec"]["networking"] = {
        "subnetCidrs": ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20", "10.0.48.0/20"]
    }
    assert problems("EKSCluster", xr) == []
