"""The harness itself: failures are loud, stopping leaves nothing, the runtime's decisions."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_inference_cluster.tenants import namespace_object
from modelplane_common.naming import CLUSTER_LABEL
from modelplane_realplane import build, charts, components, plane, processes, runtime
from modelplane_realplane.components import COMPONENTS
from modelplane_realplane.reconcile import tenant_namespace_problems


def test_a_component_that_exits_fails_with_its_log(tmp_path: Path) -> None:
    pid = processes.start("broken", ["sh", "-c", "echo 'listen tcp: address in use'; exit 3"],
                          tmp_path)  # fmt: skip
    with pytest.raises(processes.ComponentError) as failure:
        processes.wait_ready("broken", pid, tmp_path / "broken.log", lambda: False, timeout=20)
    assert "broken exited before it was ready" in str(failure.value)
    assert "listen tcp: address in use" in str(failure.value)


def test_a_component_that_never_comes_up_times_out_with_its_log(tmp_path: Path) -> None:
    pid = processes.start("slow", ["sh", "-c", "echo waiting for etcd; sleep 60"], tmp_path)
    try:
        with pytest.raises(processes.ComponentError, match="not ready after 1 s") as failure:
            processes.wait_ready("slow", pid, tmp_path / "slow.log", lambda: False, timeout=1)
        assert "waiting for etcd" in str(failure.value)
    finally:
        processes.stop(pid)


def test_stopping_kills_the_whole_process_group(tmp_path: Path) -> None:
    # A child that ignores SIGTERM, as a function inside its PID namespace does.
    pid = processes.start("tree", ["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & wait"],
                          tmp_path)  # fmt: skip
    deadline = time.monotonic() + 10
    while len(processes.group_members(pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes.group_members(pid)) == 3
    processes.stop(pid, grace=0.5)
    assert processes.group_members(pid) == []
    assert not processes.alive(pid)


def test_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    # An ephemeral port can go to an outgoing connection before a slow component binds it.
    low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    allocator = processes.PortAllocator(low - 40, high + 1000, start=low - 40)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", low - 39))
        ports = [allocator.take() for _ in range(60)]
    assert low - 39 not in ports
    assert len(set(ports)) == len(ports)
    assert [port for port in ports if port < low][:3] == [low - 40, low - 38, low - 37]
    assert not [port for port in ports if low <= port <= high]
    assert processes.free_port() < low


def test_every_version_is_read_from_the_one_go_mod_that_pins_it() -> None:
    versions = components.versions()
    assert versions["kube-apiserver"].startswith("v1.34.")
    assert versions["crossplane-core"].startswith("v2.3.")
    assert versions["crossplane"].startswith("v2.5.")
    for component in COMPONENTS:
        text = component.go_mod.read_text()
        assert text.count(f"{component.upstream} {component.version}") == 1, component.name
        assert (component.go_mod.parent / "go.sum").is_file()


def test_kubernetes_binaries_are_stamped_with_their_version() -> None:
    apiserver = components.BY_NAME["kube-apiserver"]
    assert f"gitVersion={apiserver.version}" in apiserver.ldflags()
    assert "gitMinor=34" in apiserver.ldflags()
    core = components.BY_NAME["crossplane-core"]
    assert f"pkg/version.version={core.version}" in core.ldflags()


def test_a_binary_missing_from_the_cache_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(build, "BIN", tmp_path)
    with pytest.raises(build.BuildError, match="realplane build"):
        build.binary("kube-apiserver")
    assert not build.is_current(components.BY_NAME["etcd"], "go1.26.8")


def _revision(parent: str, desired: str = "Active", **status: object) -> dict[str, object]:
    return {
        "metadata": {"name": f"{parent}-abc", "labels": {runtime.PARENT_LABEL: parent}},
        "spec": {"desiredState": desired},
        "status": status,
    }


@pytest.mark.parametrize(
    ("revision", "ports", "endpoint", "healthy"),
    [
        # A running function: its port, healthy.
        (_revision("modelplane-modelplanecompose-usages"), {"compose-usages": 0}, "port", "True"),
        # A package the plane runs no function for: never healthy, and it says so.
        (_revision("someone-elses-function"), {}, "", "False"),
    ],
)
def test_the_runtime_sets_endpoint_tls_secret_and_health(
    revision: dict[str, object], ports: dict[str, int], endpoint: str, healthy: str
) -> None:
    if ports:
        server = processes.free_port()
        ports = {name: server for name in ports}
    with _listening(ports):
        status = runtime.desired_status(revision, ports)
    assert status is not None
    if endpoint == "port":
        assert status["endpoint"] == f"127.0.0.1:{next(iter(ports.values()))}"
    condition = next(c for c in status["conditions"] if c["type"] == "RuntimeHealthy")
    assert condition["status"] == healthy
    assert (
        status["tlsServerSecretName"]
        == f"{revision['metadata']['labels'][runtime.PARENT_LABEL]}-tls-server"
    )  # type: ignore[index]


def test_the_runtime_leaves_inactive_revisions_alone() -> None:
    revision = _revision("modelplane-modelplanecompose-usages", desired="Inactive")
    assert runtime.desired_status(revision, {"compose-usages": 1}) is None


def test_the_runtime_reports_a_function_that_stopped_answering() -> None:
    revision = _revision("modelplane-modelplanecompose-usages")
    status = runtime.desired_status(revision, {"compose-usages": processes.free_port()})
    assert status is not None
    condition = next(c for c in status["conditions"] if c["type"] == "RuntimeHealthy")
    assert (condition["status"], "not answering" in condition["message"]) == ("False", True)


@contextlib.contextmanager
def _listening(ports: dict[str, int]) -> Iterator[None]:
    """Listen on every port in ``ports`` for the duration of the block."""
    with contextlib.ExitStack() as stack:
        for port in set(ports.values()):
            server = stack.enter_context(socket.socket())
            server.bind(("127.0.0.1", port))
            server.listen()
        yield


def test_the_lws_controller_is_the_version_of_the_chart_modelplane_pins() -> None:
    """The real LeaderWorkerSet controller plays the `lws` release's Deployment: the two
    versions must move together."""
    (lws,) = [c for c in charts.pinned_charts() if c.name == "lws"]
    assert components.BY_NAME["lws"].version == lws.version


def test_provider_kubernetes_runs_with_the_arguments_the_install_gives_it() -> None:
    # Replica and cache Objects set spec.watch; only --enable-watches makes the provider honour
    # it, so the real plane must run what docs/manifests/providers.yaml configures.
    assert plane.runtime_args("provider-kubernetes") == ["--enable-watches"]
    assert plane.runtime_args("provider-helm") == []


def test_crossplane_runs_with_the_arguments_the_install_gives_it() -> None:
    """The circuit breaker's limits of docs/crossplane-values.yaml, each a flag the pinned
    Crossplane core declares (an unknown flag would stop it starting)."""
    args = plane.crossplane_args()
    assert [a.split("=")[0] for a in args] == [
        "--circuit-breaker-burst", "--circuit-breaker-refill-rate", "--circuit-breaker-cooldown",
    ]  # fmt: skip
    declared = plane.module_dir("crossplane-core") / "cmd" / "crossplane" / "core" / "core.go"
    if declared.is_file():  # the module is in Go's cache once the plane was built
        fields = declared.read_text()
        for field in ("CircuitBreakerBurst", "CircuitBreakerRefillRate", "CircuitBreakerCooldown"):
            assert field in fields


def test_convergence_waits_for_the_tenant_namespace_object_its_replicas_deploy_into() -> None:
    """Replicas may be up in a namespace an earlier example left on the workload cluster
    before their InferenceCluster's next poll composes its namespace Object: not converged."""

    def replica_object(cluster: str, namespace: str) -> dict:
        return {
            "metadata": {"name": f"engine-{namespace}", "labels": {CLUSTER_LABEL: cluster}},
            "spec": {"forProvider": {"manifest": {
                "kind": "Deployment", "metadata": {"name": "engine", "namespace": namespace},
            }}},
        }  # fmt: skip

    replicas = [replica_object("lab-h100", "ml-team"), replica_object("lab-l4", "default")]
    assert tenant_namespace_problems(replicas) == [
        "InferenceCluster lab-h100: no namespace Object for tenant ml-team yet"
    ]
    other_cluster = namespace_object("lab-l4", "ml-team", "lab-l4", "crossplane-system")
    assert tenant_namespace_problems([*replicas, other_cluster]) != []
    its_own = namespace_object("lab-h100", "ml-team", "lab-h100", "crossplane-system")
    assert tenant_namespace_problems([*replicas, its_own]) == []
