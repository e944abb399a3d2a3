"""Taints, tolerations, the failover grace period and the scale selector through
`modelplane validate` (the XRDs' schema and CEL rules): bad values are rejected with a
message naming the field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from modelplane.main import cli
from modelplane.xrd import catalog

GPU = {"name": "gpu", "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}]}


def deployment(tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    member = {
        "role": "Standalone",
        "nodeSelector": {"devices": [GPU]},
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm:1"}]}},
    }
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-8b", "namespace": "ml-team"},
        "spec": {
            "replicas": 1,
            "tolerations": tolerations,
            "engines": [{"name": "main", "members": [member]}],
        },
    }


def cluster(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "lab"},
        "spec": {
            "cluster": {"source": "Existing", "existing": {"secretRef": {"name": "kubeconfig"}}},
            "nodePools": [{"name": "l4", "className": "l4"}],
            **spec,
        },
    }


def validate(tmp_path, obj: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "obj.yaml"
    path.write_text(yaml.safe_dump(obj))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output


MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}

VALID = {
    "taints": cluster(
        taints=[
            MAINTENANCE,
            {"key": "modelplane.ai/maintenance", "effect": "NoSchedule", "value": "upgrade-1.36"},
            {"key": "dedicated", "value": "research", "effect": "NoSchedule"},
        ],
        failoverGracePeriod="1h30m",
    ),
    "tolerations": deployment(
        [
            {"key": "modelplane.ai/maintenance", "operator": "Exists"},
            {"key": "dedicated", "value": "research", "effect": "NoSchedule"},
            {"operator": "Exists"},  # tolerates everything, as in Kubernetes
            {"key": "k", "operator": "Exists", "effect": ""},
        ]
    ),
}

REJECTED = {
    "taint key with a space": (
        cluster(taints=[{"key": "bad key", "effect": "NoSchedule"}]),
        "spec.taints[].key must be a label key",
    ),
    "taint key with an empty prefix": (
        cluster(taints=[{"key": "/maintenance", "effect": "NoSchedule"}]),
        "spec.taints[].key must be a label key",
    ),
    "taint name of 64 characters": (
        cluster(taints=[{"key": "x" * 64, "effect": "NoSchedule"}]),
        "spec.taints[].key must be a label key",
    ),
    "taint without a key": (
        cluster(taints=[{"effect": "NoSchedule"}]),
        "spec.taints[0].key: Required value",
    ),
    "taint with an unknown effect": (
        cluster(taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
        "spec.taints[0].effect: Unsupported value",
    ),
    "taint without an effect": (
        cluster(taints=[{"key": "k"}]),
        "spec.taints[0].effect: Required value",
    ),
    "taint value not a label value": (
        cluster(taints=[{"key": "k", "value": "a b", "effect": "NoSchedule"}]),
        "spec.taints[].value must be a label value",
    ),
    "same key and effect twice": (
        cluster(taints=[MAINTENANCE, {**MAINTENANCE, "value": "x"}]),
        "spec.taints[1]: Duplicate value",
    ),
    "grace period without a unit": (
        cluster(failoverGracePeriod="600"),
        "spec.failoverGracePeriod must be a duration",
    ),
    "Equal toleration without a key": (
        deployment([{"operator": "Equal", "value": "x"}]),
        "spec.tolerations[].key is required when operator is Equal",
    ),
    "default operator without a key": (
        deployment([{"effect": "NoExecute"}]),
        "spec.tolerations[].key is required when operator is Equal",
    ),
    "Exists toleration with a value": (
        deployment([{"key": "k", "operator": "Exists", "value": "x"}]),
        "spec.tolerations[].value must be empty when operator is Exists",
    ),
    "toleration with an unknown operator": (
        deployment([{"key": "k", "operator": "In"}]),
        "spec.tolerations[0].operator: Unsupported value",
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_taints_and_tolerations_pass(tmp_path, name):
    code, output = validate(tmp_path, VALID[name])
    assert code == 0, output


@pytest.mark.parametrize("name", list(REJECTED))
def test_invalid_taints_and_tolerations_are_rejected_naming_the_field(tmp_path, name):
    obj, message = REJECTED[name]
    code, output = validate(tmp_path, obj)
    assert code == 1, output
    assert message in output, output


def test_grace_period_defaults_to_ten_minutes():
    from modelplane import validation  # noqa: PLC0415

    definition = catalog().definition_for("modelplane.ai/v1alpha1", "InferenceCluster")
    schema = definition.body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["properties"]["failoverGracePeriod"]["default"] == "10m"
    assert validation.validate_xr(cluster()) == []


def test_scale_subresource_selects_the_deployments_replicas():
    definition = catalog().definition_for("modelplane.ai/v1alpha1", "ModelDeployment")
    (version,) = definition.body["spec"]["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas.total",
        "labelSelectorPath": ".status.selector",
    }
