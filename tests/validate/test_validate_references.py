"""`modelplane validate` warns about a reference that names nothing in the files validated.

The referent may already be on the control plane, so such a reference is a warning naming the
field, never a problem: the exit code stays 0 when nothing else is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from modelplane import references, repo, xrd
from modelplane.main import cli

API = "modelplane.ai/v1alpha1"
ELSEWHERE = "is not in the files validated (it must exist on the control plane)"


def inference_class(name: str) -> dict[str, Any]:
    device = {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"}
    return {
        "apiVersion": API,
        "kind": "InferenceClass",
        "metadata": {"name": name},
        "spec": {"devices": [device]},
    }


def inference_cluster(name: str, *classes: str) -> dict[str, Any]:
    pools = [{"name": f"pool{i}", "className": c} for i, c in enumerate(classes)]
    return {
        "apiVersion": API,
        "kind": "InferenceCluster",
        "metadata": {"name": name},
        "spec": {
            "cluster": {"source": "Existing", "existing": {"secretRef": {"name": "kc"}}},
            "nodePools": pools,
        },
    }


def model_cache(name: str, namespace: str | None = "ml-team") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": API,
        "kind": "ModelCache",
        "metadata": metadata,
        "spec": {"source": "HuggingFace", "huggingFace": {"repo": "Qwen/Qwen3-8B", "sizeGiB": 20}},
    }


ENGINE: dict[str, Any] = {
    "name": "main",
    "members": [
        {
            "role": "Standalone",
            "nodeSelector": {"devices": [{"name": "gpu", "selectors": [{"cel": "true"}]}]},
            "template": {"spec": {"containers": [{"name": "engine", "image": "vllm:1"}]}},
        }
    ],
}


def model_deployment(
    name: str, namespace: str | None = "ml-team", cache: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"replicas": 1, "engines": [ENGINE]}
    if cache is not None:
        spec["modelCacheRef"] = {"name": cache}
    return {"apiVersion": API, "kind": "ModelDeployment", "metadata": metadata, "spec": spec}


def model_replica(name: str, cluster: str, cache: str | None = None) -> dict[str, Any]:
    member = {
        "role": "Standalone",
        "nodePoolName": "pool0",
        "deviceRequests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}],
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm:1"}]}},
    }
    spec: dict[str, Any] = {
        "clusterName": cluster,
        "engines": [{"name": "main", "members": [member]}],
    }
    if cache is not None:
        spec["modelCacheRef"] = {"name": cache}
    metadata = {"name": name, "namespace": "ml-team"}
    return {"apiVersion": API, "kind": "ModelReplica", "metadata": metadata, "spec": spec}


def model_endpoint(name: str, namespace: str = "ml-team", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ModelEndpoint",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"url": "https://api.provider.example/v1"},
    }


def model_service(name: str, *selectors: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ModelService",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"endpoints": [{"selector": {"matchLabels": s}} for s in selectors]},
    }


def deployment_label(name: str) -> dict[str, str]:
    return {"modelplane.ai/deployment": name}


def write(directory: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, objects in files.items():
        (directory / name).write_text(yaml.safe_dump_all(objects, sort_keys=False))


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, ["validate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output + result.stderr
    return result


def warnings_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


# ---------------------------------------------------------------------------------------------
# The brief's first case, in full: one typo, one warning, exit 0.


def test_a_misspelt_class_name_warns_naming_the_field_and_the_name_and_succeeds(tmp_path: Path):
    write(
        tmp_path,
        {
            "classes.yaml": [inference_class("l4"), inference_class("l40s")],
            "cluster.yaml": [inference_cluster("lab", "l4", "l40ss")],
        },
    )
    result = run(str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"warning: {tmp_path / 'cluster.yaml'}: InferenceCluster/lab: "
        f'spec.nodePools[1].className: InferenceClass "l40ss" {ELSEWHERE}; '
        'did you mean "l40s"?'
    ]
    assert result.stdout.strip() == "3 objects valid; 1 warning(s)"


# ---------------------------------------------------------------------------------------------
# Table: files -> the warnings expected, as (file, Kind/name, field path, message).


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    files: dict[str, list[dict[str, Any]]]
    warnings: list[tuple[str, str, str, str]]


CASES = [
    Case(
        "a complete set warns about nothing",
        {
            "platform.yaml": [inference_class("l4"), inference_cluster("lab", "l4")],
            "team.yaml": [
                model_cache("weights"),
                model_deployment("qwen", cache="weights"),
                model_service("chat", deployment_label("qwen")),
            ],
        },
        [],
    ),
    Case(
        "a referent in another file of the set counts",
        {
            "a-class.yaml": [inference_class("l4")],
            "b-cluster.yaml": [inference_cluster("lab", "l4")],
            "c-cache.yaml": [model_cache("weights")],
            "d-deployment.yaml": [model_deployment("qwen", cache="weights")],
        },
        [],
    ),
    Case(
        "a class on the control plane only",
        {"cluster.yaml": [inference_cluster("lab", "h100-8x")]},
        [
            (
                "cluster.yaml",
                "InferenceCluster/lab",
                "spec.nodePools[0].className",
                f'InferenceClass "h100-8x" {ELSEWHERE}',
            )
        ],
    ),
    Case(
        "a cache of another namespace does not count",
        {
            "cache.yaml": [model_cache("weights", namespace="research")],
            "deployment.yaml": [model_deployment("qwen", cache="weights")],
        },
        [
            (
                "deployment.yaml",
                "ModelDeployment/qwen",
                "spec.modelCacheRef.name",
                f'ModelCache "weights" in namespace ml-team {ELSEWHERE}; there is one in '
                "namespace research, but a ModelDeployment can only use a ModelCache in its own "
                "namespace",
            )
        ],
    ),
    Case(
        "no namespace on either side means the same namespace, default",
        {
            "cache.yaml": [model_cache("weights", namespace=None)],
            "deployment.yaml": [model_deployment("qwen", namespace=None, cache="weights")],
        },
        [],
    ),
    Case(
        "a deployment without a namespace looks in default",
        {
            "cache.yaml": [model_cache("weights")],
            "deployment.yaml": [model_deployment("qwen", namespace=None, cache="weights")],
        },
        [
            (
                "deployment.yaml",
                "ModelDeployment/qwen",
                "spec.modelCacheRef.name",
                f'ModelCache "weights" in namespace default {ELSEWHERE}; there is one in '
                "namespace ml-team, but a ModelDeployment can only use a ModelCache in its own "
                "namespace",
            )
        ],
    ),
    Case(
        "a misspelt cache name",
        {"all.yaml": [model_cache("qwen3-weights"), model_deployment("q", cache="qwen3-weight")]},
        [
            (
                "all.yaml",
                "ModelDeployment/q",
                "spec.modelCacheRef.name",
                f'ModelCache "qwen3-weight" in namespace ml-team {ELSEWHERE}; '
                'did you mean "qwen3-weights"?',
            )
        ],
    ),
    Case(
        "a replica's cluster and cache",
        {
            "replica.yaml": [model_replica("r-1", "lab", cache="weights")],
            "cluster.yaml": [inference_class("l4"), inference_cluster("other", "l4")],
        },
        [
            (
                "replica.yaml",
                "ModelReplica/r-1",
                "spec.modelCacheRef.name",
                f'ModelCache "weights" in namespace ml-team {ELSEWHERE}',
            ),
            (
                "replica.yaml",
                "ModelReplica/r-1",
                "spec.clusterName",
                f'InferenceCluster "lab" {ELSEWHERE}',
            ),
        ],
    ),
    Case(
        "a service's deployments: present, missing, in another namespace",
        {
            "deployments.yaml": [
                model_deployment("qwen"),
                model_deployment("llama", namespace="research"),
            ],
            "service.yaml": [
                model_service(
                    "chat",
                    deployment_label("qwen"),
                    deployment_label("qwen-canary"),
                    deployment_label("llama"),
                )
            ],
        },
        [
            (
                "service.yaml",
                "ModelService/chat",
                "spec.endpoints[1].selector.matchLabels[modelplane.ai/deployment]",
                f'ModelDeployment "qwen-canary" in namespace ml-team {ELSEWHERE}',
            ),
            (
                "service.yaml",
                "ModelService/chat",
                "spec.endpoints[2].selector.matchLabels[modelplane.ai/deployment]",
                f'ModelDeployment "llama" in namespace ml-team {ELSEWHERE}; there is one in '
                "namespace research, but a ModelService can only use a ModelDeployment in its "
                "own namespace",
            ),
        ],
    ),
    Case(
        "a service's hand-written endpoints are selected by label",
        {
            "endpoints.yaml": [
                model_endpoint("hosted", **{"modelplane.ai/endpoint": "hosted", "tier": "a"}),
                model_endpoint("other", namespace="research", **{"modelplane.ai/endpoint": "x"}),
                model_endpoint("composed", **deployment_label("gone")),
            ],
            "service.yaml": [
                model_service(
                    "chat",
                    {"modelplane.ai/endpoint": "hosted"},
                    {"modelplane.ai/endpoint": "x"},
                    deployment_label("gone"),
                    {**deployment_label("qwen"), "tier": "a"},
                )
            ],
        },
        [
            (
                "service.yaml",
                "ModelService/chat",
                f"spec.endpoints[{i}].selector.matchLabels",
                "selects no ModelEndpoint in namespace ml-team in the files validated (they "
                "must exist on the control plane)",
            )
            for i in (1, 3)  # 3: a ModelDeployment's endpoints never carry label "tier"
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_references(tmp_path: Path, case: Case):
    write(tmp_path, case.files)
    result = run(str(tmp_path))
    assert result.exit_code == 0, result.stderr  # a dangling reference never fails
    assert warnings_of(result) == [
        f"warning: {tmp_path / file}: {obj}: {path}: {message}"
        for file, obj, path, message in case.warnings
    ]
    assert [line for line in result.stderr.splitlines() if not line.startswith("warning: ")] == []
    valid = sum(len(objects) for objects in case.files.values())
    noun = "object" if valid == 1 else "objects"
    tail = f"; {len(case.warnings)} warning(s)" if case.warnings else ""
    assert result.stdout.strip() == f"{valid} {noun} valid{tail}"


def test_a_referent_under_another_path_given_counts(tmp_path: Path):
    write(tmp_path / "platform", {"classes.yaml": [inference_class("l4")]})
    write(tmp_path / "clusters", {"lab.yaml": [inference_cluster("lab", "l4")]})
    alone = run(str(tmp_path / "clusters"))
    assert alone.exit_code == 0
    assert len(warnings_of(alone)) == 1
    together = run(str(tmp_path / "platform"), str(tmp_path / "clusters" / "lab.yaml"))
    assert together.exit_code == 0
    assert warnings_of(together) == []


def test_warnings_do_not_hide_problems_nor_change_the_exit_code(tmp_path: Path):
    broken = model_cache("weights")
    broken["spec"]["huggingFace"]["sizeGiB"] = 0
    write(tmp_path, {"all.yaml": [broken, model_deployment("qwen", cache="wieghts")]})
    result = run(str(tmp_path))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{tmp_path / 'all.yaml'}: ModelCache/weights: ")
    assert lines[1].startswith(
        f"warning: {tmp_path / 'all.yaml'}: ModelDeployment/qwen: spec.modelCacheRef.name: "
        'ModelCache "wieghts" in namespace ml-team'
    )
    assert lines[2:] == ["1 object valid; 1 problem(s); 1 warning(s)"]


def test_json_output_lists_the_warnings(tmp_path: Path):
    write(tmp_path, {"cluster.yaml": [inference_cluster("lab", "l4")]})
    result = run("-o", "json", str(tmp_path))
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["problemCount"] == 0
    assert report["warningCount"] == 1
    assert report["warnings"] == [
        {
            "file": str(tmp_path / "cluster.yaml"),
            "kind": "InferenceCluster",
            "name": "lab",
            "path": "spec.nodePools[0].className",
            "message": f'InferenceClass "l4" {ELSEWHERE}',
        }
    ]


def test_malformed_references_are_left_to_the_schema(tmp_path: Path):
    cluster = inference_cluster("lab", "l4")
    cluster["spec"]["nodePools"][0]["className"] = 7
    deployment = model_deployment("qwen")
    deployment["spec"]["modelCacheRef"] = ["weights"]
    service = model_service("chat")
    service["spec"]["endpoints"] = [{"selector": "all"}, "x"]
    write(tmp_path, {"bad.yaml": [cluster, deployment, service, "just a string"]})
    result = run(str(tmp_path))
    assert result.exit_code == 1  # the schema reports them
    assert warnings_of(result) == []


# ---------------------------------------------------------------------------------------------
# The bundled examples.

EXAMPLES = repo.root() / "examples"
# examples/README.md: sets a control plane applies as they are, so each is self-contained.
COMPLETE_SETS = ["quickstart", "multi-cluster", "multi-node", "disaggregated", "canary", "platform"]
# Inputs for `modelplane render`, one XR at a time beside state the control plane would hold:
# their references to that state are warned about, and nothing else changes.
RENDER_INPUTS = sorted(
    d.name for d in EXAMPLES.iterdir() if d.is_dir() and d.name not in COMPLETE_SETS
)
_WARNING = re.compile(
    r'^warning: examples/(?P<dir>[^/]+)/\S+\.ya?ml: \w+/\S+: spec\.\S+: \w+ "[^"]+"'
    rf"( in namespace \S+)? {re.escape(ELSEWHERE)}(; .*)?$"
)


def _problems_of(result: Result) -> list[str]:
    lines = result.stderr.strip().splitlines()
    return [line for line in lines[:-1] if not line.startswith("warning: ")]


@pytest.mark.parametrize("name", COMPLETE_SETS)
def test_a_complete_example_has_no_dangling_reference(name: str, monkeypatch):
    monkeypatch.chdir(repo.root())
    result = run(f"examples/{name}")
    assert warnings_of(result) == []


@pytest.mark.parametrize("name", RENDER_INPUTS)
def test_a_render_input_example_warns_only_about_what_the_control_plane_holds(
    name: str, monkeypatch
):
    monkeypatch.chdir(repo.root())
    result = run(f"examples/{name}")
    assert result.exit_code == (1 if _problems_of(result) else 0)
    for line in warnings_of(result):
        match = _WARNING.match(line)
        assert match and match["dir"] == name, line


def test_the_render_inputs_do_refer_to_the_control_plane(monkeypatch):
    """What the examples show on purpose, so this test keeps meaning something."""
    monkeypatch.chdir(repo.root())
    result = run("examples/replica")
    assert any(".className: InferenceClass" in line for line in warnings_of(result))
    # Its clusters.yaml carries the caches the replicas mount, as the control plane has them.
    assert not any("spec.modelCacheRef.name: ModelCache" in line for line in warnings_of(result))


# ---------------------------------------------------------------------------------------------
# The module's fixed facts agree with the repository.


def test_the_cluster_scoped_kinds_are_those_of_the_xrds():
    scoped = {d.kind for d in xrd.catalog().definitions.values() if d.group == references.GROUP}
    cluster = {
        d.kind
        for d in xrd.catalog().definitions.values()
        if d.group == references.GROUP and not d.namespaced
    }
    assert cluster == references.CLUSTER_SCOPED
    assert {"InferenceClass", "ModelCache", "ModelDeployment", "ModelService"} <= scoped


def test_the_composed_endpoint_labels_are_those_compose_model_deployment_writes():
    names = pytest.importorskip("compose_model_deployment.names")
    assert set(names.labels("d", "c", 0)) == references.COMPOSED_ENDPOINT_LABELS
