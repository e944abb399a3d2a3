"""Issue 21, item 1 (D10), through `simulate`'s control plane over real gRPC functions: teams
using identical names on one workload cluster never share, fight over or delete each other's
remote objects, and their routes never reach each other's endpoints."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml
from modelplane import repo
from modelplane.controlplane import ControlPlane, session
from modelplane.kube import condition_status, lookup

QUICKSTART = repo.root() / "examples" / "quickstart"
PLATFORM = ("cluster.yaml", "gateway.yaml", "inferenceclass.yaml", "kubeconfig.yaml")
DEPLOYMENT = yaml.safe_load((QUICKSTART / "deployment.yaml").read_text())
SERVICE = yaml.safe_load((QUICKSTART / "service.yaml").read_text())


def team(namespace: str) -> list[dict]:
    """The same deployment, cache and service every team writes, in its own namespace."""
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["metadata"]["namespace"] = namespace
    deployment["spec"]["replicas"] = 1
    deployment["spec"]["modelCacheRef"] = {"name": "qwen"}
    service = copy.deepcopy(SERVICE)
    service["metadata"]["namespace"] = namespace
    cache = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "qwen", "namespace": namespace},
        "spec": {"source": "HuggingFace", "huggingFace": {"repo": "Qwen/Qwen3-8B", "sizeGiB": 20}},
    }
    namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    return [namespace_object, cache, deployment, service]


def world(tmp_path: Path, teams: tuple[str, ...]) -> Path:
    for name in PLATFORM:
        shutil.copy(QUICKSTART / name, tmp_path)
    cluster = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    cluster["spec"]["nodePools"][0]["nodeCount"] = 4  # room for every team's replica
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    system = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "modelplane-system"}}
    documents = [system] + [doc for t in teams for doc in team(t)]
    (tmp_path / "teams.yaml").write_text(yaml.safe_dump_all(documents))
    return tmp_path


def remote_identities(plane: ControlPlane) -> list[tuple[str, ...]]:
    """(provider config, apiVersion, kind, namespace, name) of every object an Object puts
    on a workload cluster; all clusters here share one config per cluster."""
    found = []
    for obj in plane.list(kind="Object"):
        manifest = lookup(obj, ".spec.forProvider.manifest") or {}
        found.append(
            (
                str(lookup(obj, ".spec.providerConfigRef.name")),
                str(manifest.get("apiVersion")),
                str(manifest.get("kind")),
                str(lookup(manifest, ".metadata.namespace") or "-"),
                str(lookup(manifest, ".metadata.name")),
            )
        )
    return found


def team_state(plane: ControlPlane, namespace: str) -> dict[tuple[str, str], tuple]:
    """Everything a team owns on the control plane (and its remote namespace's Object), by
    kind and name: uid, spec and the remote copy provider-kubernetes observed."""
    state = {}
    for obj in plane.objects():
        metadata = obj["metadata"]
        is_namespace_object = (
            obj["kind"] == "Object"
            and lookup(obj, ".spec.forProvider.manifest.kind") == "Namespace"
            and lookup(obj, ".spec.forProvider.manifest.metadata.name") == namespace
        )
        if metadata.get("namespace") == namespace or is_namespace_object:
            state[(obj["kind"], metadata["name"])] = (
                metadata.get("uid"),
                obj.get("spec"),
                lookup(obj, ".status.atProvider.manifest.metadata.uid"),
            )
    return state


@pytest.fixture(scope="module")
def three_teams(tmp_path_factory: pytest.TempPathFactory):
    with session(
        world(tmp_path_factory.mktemp("tenants"), ("team-a", "team-b", "team-c"))
    ) as plane:
        assert plane.run(max_rounds=60).converged
        yield plane


@pytest.mark.parametrize("teams", [("team-a", "team-b"), ("team-a", "team-b", "team-c")])
def test_teams_with_identical_names_share_no_remote_object(tmp_path: Path, teams):
    with session(world(tmp_path, teams)) as plane:
        assert plane.run(max_rounds=60).converged
        identities = remote_identities(plane)
        assert len(identities) == len(set(identities)), "two Objects manage one remote object"
        for namespace in teams:
            deployment = plane.find("ModelDeployment", "qwen3-8b", namespace)
            assert condition_status(deployment, "Ready") == "True", namespace
            mine = [
                i
                for obj, i in zip(plane.list(kind="Object"), identities, strict=True)
                if obj["metadata"].get("namespace") == namespace
            ]
            kinds = {i[2] for i in mine}
            assert {"Deployment", "Service", "HTTPRoute", "PersistentVolumeClaim"} <= kinds
            assert {i[3] for i in mine} == {namespace}  # all in the team's own namespace
        namespaces = [i[4] for i in identities if i[2] == "Namespace"]
        assert sorted(n for n in namespaces if n.startswith("team-")) == sorted(teams)


def test_routes_of_one_team_never_reach_another_teams_endpoints(three_teams: ControlPlane):
    plane = three_teams
    for namespace in ("team-a", "team-b", "team-c"):
        service = plane.find("ModelService", "chat", namespace)
        (route,) = plane.composed_by(service, recursive=False)
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                assert ref.get("namespace", namespace) == namespace
                backend = plane.find("Service", ref["name"], namespace)
                owner = backend["metadata"]["ownerReferences"][0]
                endpoint = plane.find("ModelEndpoint", owner["name"], namespace)
                assert endpoint["spec"]["rewritePath"].startswith(f"/{namespace}/")
        # On the workload cluster, the team's route matches its own prefix and sends to a
        # Service of its own namespace (a backendRef without namespace stays in the route's).
        for obj in plane.list(kind="Object", namespace=namespace):
            manifest = obj["spec"]["forProvider"]["manifest"]
            if manifest["kind"] != "HTTPRoute":
                continue
            (rule,) = manifest["spec"]["rules"]
            assert rule["matches"][0]["path"]["value"].startswith(f"/{namespace}/")
            assert all("namespace" not in ref for ref in rule["backendRefs"])


def _delete_round_by_round(plane: ControlPlane, key, others: tuple[str, ...]) -> int:
    before = {t: team_state(plane, t) for t in others}
    plane.delete(key)
    for rounds in range(1, 60):
        report = plane.round()
        for namespace in others:
            assert team_state(plane, namespace) == before[namespace], (namespace, rounds)
        if not report.changed:
            return rounds
    raise AssertionError("did not settle")


def test_deleting_one_teams_deployment_cache_or_namespace_touches_no_other_team(tmp_path: Path):
    with session(world(tmp_path, ("team-a", "team-b", "team-c"))) as plane:
        assert plane.run(max_rounds=60).converged
        _delete_round_by_round(
            plane, plane.key("ModelDeployment", "qwen3-8b", "team-a"), ("team-b", "team-c")
        )
        assert not plane.list(kind="ModelReplica", namespace="team-a")
        _delete_round_by_round(
            plane, plane.key("ModelCache", "qwen", "team-b"), ("team-a", "team-c")
        )
        # team-b's replica keeps running on weights already staged, and says the cache is gone.
        deployment = plane.find("ModelDeployment", "qwen3-8b", "team-b")
        scheduled = next(
            c for c in deployment["status"]["conditions"] if c["type"] == "ReplicasScheduled"
        )
        assert scheduled["reason"] == "CacheNotFound"
        assert plane.list(kind="ModelReplica", namespace="team-b")
        # A team that leaves deletes its Modelplane resources, then its namespace: nothing of
        # it is left on either cluster (but the namespace on the workload cluster, D10).
        for kind, name in (("ModelService", "chat"), ("ModelCache", "qwen")):
            _delete_round_by_round(plane, plane.key(kind, name, "team-a"), ("team-b", "team-c"))
        _delete_round_by_round(plane, plane.key("Namespace", "team-a", None), ("team-b", "team-c"))
        assert not [o for o in plane.objects() if o["metadata"].get("namespace") == "team-a"]
        assert plane.find("Namespace", "team-a") is None
        identities = remote_identities(plane)
        assert not [i for i in identities if i[3] == "team-a" and i[2] != "Namespace"]


def test_deleting_a_namespace_that_still_holds_replicas_leaves_their_workloads_running(
    tmp_path: Path,
):
    """As the real plane showed: an Object in a terminating namespace is never deleted (its
    provider cannot record its provider config's use there, crossplane-runtime#1150), so
    deleting a team's namespace before its deployments leaves the Objects deleting for ever
    and their workloads running on the GPUs. simulate shows exactly that, and the other team
    is untouched (docs/operations.md: delete a team's Modelplane resources first)."""
    with session(world(tmp_path, ("team-a", "team-c"))) as plane:
        assert plane.run(max_rounds=60).converged
        workloads = [i for i in remote_identities(plane) if i[3] == "team-c"]
        assert any(i[2] == "Deployment" for i in workloads)
        _delete_round_by_round(plane, plane.key("Namespace", "team-c", None), ("team-a",))
        # The Modelplane resources went; their Objects are stuck deleting, and say why.
        assert not plane.list(kind="ModelDeployment", namespace="team-c")
        assert not plane.list(kind="ModelReplica", namespace="team-c")
        stuck = plane.list(kind="Object", namespace="team-c")
        assert stuck
        for obj in stuck:
            assert obj["metadata"].get("deletionTimestamp")
            synced = next(c for c in obj["status"]["conditions"] if c["type"] == "Synced")
            assert synced["status"] == "False"
            assert synced["message"].endswith(
                "unable to create new content in namespace team-c because it is being terminated"
            ), synced
        # The workloads keep running, and the namespace stays Terminating.
        assert [i for i in remote_identities(plane) if i[3] == "team-c"] == workloads
        namespace = plane.find("Namespace", "team-c")
        assert namespace["status"]["phase"] == "Terminating"
