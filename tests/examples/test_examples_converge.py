"""Every applyable example converges in `modelplane simulate` and passes `modelplane validate`.

Each example directory is a complete set a user applies to a control plane. Simulated once per
module (real functions over gRPC), it must reach a fixed point with every Modelplane resource
Ready and Synced, and show what its README promises: where replicas land, what the workload
clusters get, how traffic is split. The scenario tests at the end script the README's next
steps (scale, a replica going down) on the same simulated control planes.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from modelplane.controlplane import ControlPlane, Convergence
from modelplane.kube import condition, condition_status
from modelplane.main import cli
from modelplane.providers import matching

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# Complete applyable sets: simulate must converge with everything Ready.
CONVERGING = [
    "quickstart", "multi-cluster", "multi-node", "disaggregated", "canary", "platform",
    "amd-mi300x",
]  # fmt: skip
# Inputs for `modelplane render` (they carry observed state, or hand-made composed kinds, or a
# deliberately invalid object): not meant to be applied as a whole.
RENDER_ONLY = ["cache", "cloud-clusters", "qwen-demo", "replica", "routing"]

JSON = dict[str, Any]


@dataclasses.dataclass
class Simulated:
    """A converged example: a snapshot of its objects, and its plane to fork scenarios from."""

    plane: ControlPlane
    outcome: Convergence
    objects: list[JSON]

    def fork(self) -> ControlPlane:
        """An independent copy of the converged plane for a scenario; it shares the function
        host, so scenarios neither disturb each other nor pay for converging again."""
        plane = self.plane
        shared = (plane.runner, plane.catalog, plane.validator, plane.progress)
        return copy.deepcopy(plane, memo={id(thing): thing for thing in shared})

    def all(self, kind: str, namespace: str | None = None) -> list[JSON]:
        return [
            o
            for o in self.objects
            if o["kind"] == kind
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]

    def one(self, kind: str, name: str) -> JSON:
        (found,) = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        return found

    def composed_by(self, owner: JSON) -> Iterator[JSON]:
        """Everything ``owner`` composed, recursively, by controller reference."""
        controller = {
            o["metadata"]["uid"]: next(
                (
                    r["uid"]
                    for r in o["metadata"].get("ownerReferences") or []
                    if r.get("controller")
                ),
                None,
            )
            for o in self.objects
        }

        def under_owner(uid: str | None) -> bool:
            while uid is not None:
                if uid == owner["metadata"]["uid"]:
                    return True
                uid = controller.get(uid)
            return False

        for obj in self.objects:
            if under_owner(controller[obj["metadata"]["uid"]]):
                yield obj

    def remote(self, owner: JSON, kind: str) -> list[JSON]:
        """Manifests of ``kind`` that ``owner`` applies to a workload cluster."""
        return [
            o["spec"]["forProvider"]["manifest"]
            for o in self.composed_by(owner)
            if o["kind"] == "Object" and o["spec"]["forProvider"]["manifest"]["kind"] == kind
        ]


@pytest.fixture(scope="module")
def simulated(converged_example) -> Callable[[str], Simulated]:
    """``simulated(example)``: the example run to convergence (once per test session)."""

    def run(name: str) -> Simulated:
        converged = converged_example(name)
        return Simulated(converged.plane, converged.outcome, converged.objects)

    return run


def _in_metallb_pool(address: str) -> bool:
    """Within the examples' MetalLB pool 172.18.255.200-172.18.255.250."""
    first, last = ipaddress.ip_address("172.18.255.200"), ipaddress.ip_address("172.18.255.250")
    return first <= ipaddress.ip_address(address) <= last


def _is_modelplane(obj: JSON) -> bool:
    return str(obj.get("apiVersion", "")).split("/")[0].endswith("modelplane.ai")


def _not_ready(obj: JSON) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return "; ".join(
        f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        for c in conditions
        if c.get("status") != "True"
    )


def test_every_example_directory_is_classified():
    """A new example must be added to one list, so it is either simulated or knowingly not."""
    directories = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())
    assert directories == sorted(CONVERGING + RENDER_ONLY)


def test_examples_index_links_every_directory():
    index = (EXAMPLES / "README.md").read_text()
    assert sorted(set(re.findall(r"\]\(([\w-]+)/\)", index))) == sorted(CONVERGING + RENDER_ONLY)


@pytest.mark.parametrize("example", CONVERGING + RENDER_ONLY)
def test_every_example_has_a_readme_with_its_command(example):
    """Each README says what the example shows and gives the exact command, with real paths."""
    readme = (EXAMPLES / example / "README.md").read_text()
    verb = "simulate" if example in CONVERGING else "render"
    assert f"modelplane {verb} examples/{example}" in readme
    for path in re.findall(r"(?<![\w/])examples/[\w./-]+", readme):
        assert (REPO / path.rstrip(".")).exists(), f"{example}/README.md names {path}"


@pytest.mark.parametrize("example", CONVERGING)
def test_example_converges_with_everything_ready(example, simulated):
    run = simulated(example)
    assert run.outcome.converged, run.outcome.reason
    modelplane = [o for o in run.objects if _is_modelplane(o)]
    assert modelplane
    unready = {
        f"{o['kind']}/{o['metadata']['name']}": _not_ready(o)
        for o in modelplane
        if condition_status(o, "Ready") != "True" or condition_status(o, "Synced") != "True"
    }
    assert not unready
    # Every provider-managed object is Ready too (remote workloads, releases, cloud resources).
    managed = [o for o in run.objects if condition(o, "Ready") and not _is_modelplane(o)]
    assert [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in managed
        if condition_status(o, "Ready") != "True"
    ] == []


@pytest.mark.parametrize("example", CONVERGING)
def test_example_passes_validate(example):
    result = CliRunner().invoke(cli, ["validate", str(EXAMPLES / example)])
    assert result.exit_code == 0, result.output
    assert "objects valid" in result.output and "problem" not in result.output


@pytest.mark.parametrize(
    "example", ["quickstart", "multi-node", "disaggregated", "canary", "platform"]
)
def test_existing_clusters_come_with_their_kubeconfig_secret(example):
    """Valid for a real control plane: every Secret an Existing cluster names is in the dir,
    alone in its own file, so a user can replace the placeholder without touching the rest."""
    files = {
        f.name: [d for d in yaml.safe_load_all(f.read_text()) if d]
        for f in sorted((EXAMPLES / example).glob("*.yaml"))
    }
    docs = [d for file_docs in files.values() for d in file_docs]
    secrets = {
        (d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs if d["kind"] == "Secret"
    }
    clusters = [d for d in docs if d["kind"] == "InferenceCluster"]
    existing = [c for c in clusters if c["spec"]["cluster"]["source"] == "Existing"]
    assert existing
    for cluster in existing:
        ref = cluster["spec"]["cluster"]["existing"]["secretRef"]["name"]
        assert ("modelplane-system", ref) in secrets
    assert [
        [d["kind"] for d in file_docs]
        for file_docs in files.values()
        if any(d["kind"] == "Secret" for d in file_docs)
    ] == [["Secret"]]
    namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert "modelplane-system" in namespaces
    if any(d["kind"] == "ModelDeployment" for d in docs):
        assert "ml-team" in namespaces
    assert not any("status" in d for d in docs), "examples hold no observed state"


def test_converging_examples_hold_only_kinds_users_create():
    """Internal infrastructure.modelplane.ai kinds are composed, never applied by users."""
    for example in CONVERGING:
        for path in sorted((EXAMPLES / example).rglob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                assert (
                    not (doc or {})
                    .get("apiVersion", "")
                    .startswith("infrastructure.modelplane.ai/")
                ), f"{path}: {doc['kind']} is internal"


# --- quickstart --------------------------------------------------------------------------


def test_quickstart_places_two_replicas_on_the_one_cluster_and_serves_them(simulated):
    run = simulated("quickstart")
    replicas = run.all("ModelReplica", "ml-team")
    assert sorted(
        (r["spec"]["clusterName"], r["metadata"]["labels"]["modelplane.ai/replica-index"])
        for r in replicas
    ) == [("lab", "0"), ("lab", "1")]
    assert {m["nodePoolName"] for r in replicas for m in r["spec"]["engines"][0]["members"]} == {
        "l4"
    }
    deployment = run.one("ModelDeployment", "qwen3-8b")
    assert deployment["status"]["replicas"] == {"total": 2, "ready": 2}
    assert condition(deployment, "ReplicasScheduled")["message"] == "Scheduled 2 of 2 replicas"

    gateway = run.one("InferenceGateway", "default")["status"]["address"]
    assert _in_metallb_pool(gateway)
    service = run.one("ModelService", "chat")
    assert service["status"]["address"] == f"http://{gateway}/ml-team/chat"

    lab_gateway = run.one("InferenceCluster", "lab")["status"]["gateway"]["address"]
    endpoints = run.all("ModelEndpoint", "ml-team")
    assert sorted(e["spec"]["url"] for e in endpoints) == sorted(
        f"http://{lab_gateway}/ml-team/{r['metadata']['name']}/v1" for r in replicas
    )
    (route,) = run.composed_by(service)
    assert len(route["spec"]["rules"][0]["backendRefs"]) == 2
    # Each replica runs its engine as one Deployment claiming one GPU on the pool's nodes.
    for replica in replicas:
        (workload,) = run.remote(replica, "Deployment")
        assert workload["spec"]["template"]["spec"]["nodeSelector"] == {"modelplane.ai/pool": "l4"}


def test_quickstart_third_replica_does_not_fit_and_says_why(simulated):
    """The README's "ask for replicas: 3" step."""
    plane = simulated("quickstart").fork()
    plane.patch(plane.key("ModelDeployment", "qwen3-8b", "ml-team"), {"spec": {"replicas": 3}})
    assert plane.run(max_rounds=30).converged
    deployment = plane.find("ModelDeployment", "qwen3-8b", "ml-team")
    scheduled = condition(deployment, "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False",
        "InsufficientCapacity",
        "2 of 3 replicas scheduled; 0/1 clusters available for the rest: "
        '1 insufficient free devices (needs 1 GPU on one node; pool "l4" has none free on any '
        "node)",
    )
    assert len(plane.list(kind="ModelReplica")) == 2  # the serving ones stay


# --- multi-cluster -----------------------------------------------------------------------

LARGE_GPU_POOLS = {("gke-us-central", "h100"), ("eks-us-east", "l40s")}


def _placement(replicas: list[JSON]) -> Counter[tuple[str, str]]:
    return Counter(
        (r["spec"]["clusterName"], r["spec"]["engines"][0]["members"][0]["nodePoolName"])
        for r in replicas
    )


def test_multi_cluster_one_replica_on_a_pool_the_selector_allows(simulated):
    run = simulated("multi-cluster")
    assert {
        c["metadata"]["name"]: c["spec"]["cluster"]["source"] for c in run.all("InferenceCluster")
    } == {"gke-us-central": "GKE", "eks-us-east": "EKS"}
    replicas = run.all("ModelReplica", "ml-team")
    assert _placement(replicas) == Counter({("eks-us-east", "l40s"): 1})
    # Both clouds' clusters were provisioned, each with its own GPU pools.
    assert {p["name"] for p in run.one("GKECluster", "gke-us-central")["spec"]["nodePools"]} >= {
        "l4",
        "h100",
    }
    assert {p["name"] for p in run.one("EKSCluster", "eks-us-east")["spec"]["nodePools"]} >= {
        "l4",
        "l40s",
    }


def test_multi_cluster_scales_to_three(simulated):
    """README scale step: 1 -> 3 replicas fills exactly the pools with >= 40Gi GPUs."""
    run = simulated("multi-cluster")
    plane = run.fork()
    (first,) = run.all("ModelReplica", "ml-team")
    plane.patch(plane.key("ModelDeployment", "qwen3-32b", "ml-team"), {"spec": {"replicas": 3}})
    assert plane.run(max_rounds=40).converged

    replicas = plane.list(kind="ModelReplica")
    assert _placement(replicas) == Counter(
        {("eks-us-east", "l40s"): 2, ("gke-us-central", "h100"): 1}
    )
    assert first["metadata"]["name"] in {r["metadata"]["name"] for r in replicas}, "never moved"
    for replica in replicas:
        requests = replica["spec"]["engines"][0]["members"][0]["deviceRequests"]
        assert [(d["name"], d["count"]) for d in requests] == [("gpu", 1)]
        assert condition_status(replica, "Ready") == "True"
    deployment = plane.find("ModelDeployment", "qwen3-32b", "ml-team")
    assert deployment["status"]["replicas"] == {"total": 3, "ready": 3}
    assert condition_status(deployment, "Ready") == "True"
    # Each replica is reachable through its own cluster's gateway, and all three behind the
    # service's single address.
    gateways = {
        c["metadata"]["name"]: c["status"]["gateway"]["address"]
        for c in plane.list(kind="InferenceCluster")
    }
    urls = sorted(e["spec"]["url"] for e in plane.list(kind="ModelEndpoint"))
    assert urls == sorted(
        f"http://{gateways[r['spec']['clusterName']]}/ml-team/{r['metadata']['name']}/v1"
        for r in replicas
    )
    service = plane.find("ModelService", "qwen3-32b", "ml-team")
    assert condition(service, "EndpointsResolved")["message"] == "Matched 3 endpoint(s)"

    # A fourth does not fit: every qualifying node is taken, the L4 pools never qualify.
    plane.patch(plane.key("ModelDeployment", "qwen3-32b", "ml-team"), {"spec": {"replicas": 4}})
    assert plane.run(max_rounds=40).converged
    scheduled = condition(
        plane.find("ModelDeployment", "qwen3-32b", "ml-team"), "ReplicasScheduled"
    )
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InsufficientCapacity")
    assert _placement(plane.list(kind="ModelReplica")) == Counter(
        {("eks-us-east", "l40s"): 2, ("gke-us-central", "h100"): 1}
    )


# --- multi-node --------------------------------------------------------------------------


def test_multi_node_gang_is_one_leader_worker_set_over_two_h200_nodes(simulated):
    run = simulated("multi-node")
    (replica,) = run.all("ModelReplica", "ml-team")
    members = replica["spec"]["engines"][0]["members"]
    assert [(m["role"], m["nodePoolName"]) for m in members] == [
        ("Leader", "h200-ib"),
        ("Worker", "h200-ib"),
    ]
    # The InfiniBand request only steered placement: the Synthetic fabric is never claimed.
    for member in members:
        assert [(d["name"], d["count"]) for d in member["deviceRequests"]] == [("gpu", 8)]

    (lws,) = run.remote(replica, "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2  # the leader plus worker.nodes: 1
    claims = {
        c["metadata"]["name"]: c["spec"]["spec"]["devices"]["requests"]
        for c in run.remote(replica, "ResourceClaimTemplate")
    }
    assert len(claims) == 2
    assert all([r["exactly"]["count"] for r in reqs] == [8] for reqs in claims.values())

    cache = run.one("ModelCache", "kimi-k2")
    (pvc,) = run.remote(cache, "PersistentVolumeClaim")
    assert pvc["spec"]["storageClassName"] == "cephfs-rwx"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1100Gi"
    assert run.remote(cache, "Job") == [], "the hydration Job is dropped once complete"
    for pod in (template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]):
        assert pod["nodeSelector"] == {"modelplane.ai/pool": "h200-ib"}
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"] in claims
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        pvc_name = volumes[mounts["/mnt/models"]]["persistentVolumeClaim"]["claimName"]
        assert pvc_name == pvc["metadata"]["name"]
        env = {e["name"] for e in pod["containers"][0].get("env") or []}
        assert "MODELPLANE_LEADER_ADDRESS" in env


# --- disaggregated -----------------------------------------------------------------------


def test_disaggregated_replica_runs_prefill_and_decode_behind_a_picker(simulated):
    run = simulated("disaggregated")
    (replica,) = run.all("ModelReplica", "ml-team")
    assert replica["spec"]["serving"] == {"mode": "PrefillDecode"}
    workloads = {
        w["spec"]["template"]["metadata"]["labels"].get("llm-d.ai/role", "picker"): w
        for w in run.remote(replica, "Deployment")
    }
    assert set(workloads) == {"prefill", "decode", "picker"}
    assert workloads["prefill"]["spec"]["replicas"] == 2
    assert workloads["decode"]["spec"]["replicas"] == 1
    decode_containers = workloads["decode"]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in decode_containers] == ["engine", "pd-sidecar"]
    gpus = sorted(
        c["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
        for c in run.remote(replica, "ResourceClaimTemplate")
    )
    assert gpus == [2, 4]

    (config,) = run.remote(replica, "ConfigMap")
    picker = yaml.safe_load(next(iter(config["data"].values())))
    producer = next(p for p in picker["plugins"] if p["type"] == "approx-prefix-cache-producer")
    assert producer["parameters"]["blockSizeTokens"] == 32  # read from the decode args
    (pool,) = run.remote(replica, "InferencePool")
    (route,) = run.remote(replica, "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {
            "group": "inference.networking.k8s.io",
            "kind": "InferencePool",
            "name": pool["metadata"]["name"],
        }
    ]


# --- canary ------------------------------------------------------------------------------


def _backends(objects: list[JSON]) -> list[tuple[str, int, int]]:
    """(rewrite path, port, weight) of the chat service's HTTPRoute backends."""
    (route,) = [
        o
        for o in objects
        if o["kind"] == "HTTPRoute" and o["metadata"].get("namespace") == "ml-team"
    ]
    return [
        (
            ref["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"],
            ref["port"],
            ref["weight"],
        )
        for ref in route["spec"]["rules"][0]["backendRefs"]
    ]


def test_canary_splits_95_5_and_keeps_a_hosted_share(simulated):
    run = simulated("canary")
    placed = Counter(
        r["metadata"]["labels"]["modelplane.ai/deployment"] for r in run.all("ModelReplica")
    )
    assert placed == Counter({"qwen3-8b": 2, "qwen3-8b-canary": 1})
    backends = _backends(run.objects)
    weights = [(path.split("/")[2].rsplit("-", 1)[0], port, w) for path, port, w in backends]
    assert weights == [
        ("qwen3-8b", 80, 48),
        ("qwen3-8b", 80, 47),
        ("qwen3-8b-canary", 80, 5),
        ("", 443, 1),  # the hosted provider's /openai/ path
    ]
    assert backends[-1][0] == "/openai/"
    hosted = run.one("ModelEndpoint", "hosted-qwen")
    policies = [o for o in run.composed_by(hosted) if o["kind"] == "BackendTLSPolicy"]
    assert [p["spec"]["validation"]["hostname"] for p in policies] == ["api.provider.example"]


def test_canary_hosted_provider_takes_all_traffic_when_no_replica_serves(simulated):
    plane = simulated("canary").fork()
    down = plane.providers.inject(
        matching(kind="Object", namespace="ml-team", manifest_kind="Deployment"),
        manifest_status={
            "readyReplicas": 0,
            "availableReplicas": 0,
            "conditions": [{"type": "Available", "status": "False", "reason": "Unavailable"}],
        },
    )
    assert plane.run(max_rounds=30).converged
    assert plane.list(kind="ModelReplica"), "replicas stay while they are not ready"
    assert [e["metadata"]["name"] for e in plane.list(kind="ModelEndpoint")] == ["hosted-qwen"]
    assert _backends(plane.objects()) == [("/openai/", 443, 1)]

    plane.providers.clear(down)
    assert plane.run(max_rounds=30).converged
    assert [w for _, _, w in _backends(plane.objects())] == [48, 47, 5, 1]


# --- platform ----------------------------------------------------------------------------


def test_platform_publishes_pool_sizes_and_headroom(simulated):
    run = simulated("platform")
    pools = {
        (c["metadata"]["name"], p["name"]): (p["nodes"], p.get("maxNodes"))
        for c in run.all("InferenceCluster")
        for p in c["status"]["gpuPools"]
    }
    assert pools == {("gke-us-central", "l4"): (1, 4), ("lab-h100", "h100"): (2, None)}
    assert _in_metallb_pool(run.one("InferenceGateway", "default")["status"]["address"])
    kinds = Counter(o["kind"] for o in run.objects)
    assert kinds["GKECluster"] == 1 and kinds["ServingStack"] == 2


# --------------------------------------------------------------------------------------------
# apis/mrap.yaml activates exactly the managed-resource kinds the functions compose

_MANAGED_GROUP = re.compile(r"\.m\.(upbound|crossplane)\.io$")


def _mrd_name(api_version: str, kind: str) -> str:
    """A ManagedResourceDefinition's name, ``<plural>.<group>``, with the plural the providers'
    CRDs use (checked against schemas/crds.txt below)."""
    singular = kind.lower()
    if singular == "kubernetes":
        plural = singular  # Vultr's VKE Kubernetes: its CRD's plural is the singular
    elif re.search(r"[^aeiou]y$", singular):
        plural = singular[:-1] + "ies"
    elif re.search(r"(s|x|z|ch|sh)$", singular):
        plural = singular + "es"
    else:
        plural = singular + "s"
    return f"{plural}.{api_version.split('/', maxsplit=1)[0]}"


def test_mrap_activates_exactly_the_managed_kinds_the_examples_compose(simulated):
    composed = {
        _mrd_name(o["apiVersion"], o["kind"])
        # cloud-clusters: the cloud XRs alone (AKSCluster is composed by no other example).
        for example in [*CONVERGING, "cloud-clusters"]
        for o in simulated(example).objects
        if _MANAGED_GROUP.search(o["apiVersion"].split("/")[0])
        and not o["kind"].endswith("ProviderConfig")  # provider configuration, not an MRD
    }
    assert {
        "releases.helm.m.crossplane.io",
        "clusters.eks.aws.m.upbound.io",
        "kubernetesclusters.containerservice.azure.m.upbound.io",
        "kubernetes.vke.vultr.m.upbound.io",
        "clusters.mk8s.nebius.m.upbound.io",
    } <= composed
    crds = (REPO / "schemas" / "crds.txt").read_text()
    for name in composed:
        plural, _, group = name.partition(".")
        assert f"{group}_{plural}.yaml" in crds, f"{name} is not a provider CRD we know"
    mrap = yaml.safe_load((REPO / "apis" / "mrap.yaml").read_text())
    assert mrap["apiVersion"] == "apiextensions.crossplane.io/v1alpha1"
    assert sorted(mrap["spec"]["activate"]) == sorted(composed)
