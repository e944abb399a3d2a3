"""Every function image starts as Crossplane starts it and answers RunFunction over mTLS.

`modelplane package --arch amd64` builds the tarballs (spec packaging.md §4-5). For each one the
test unpacks the layers into a root, runs the image's entrypoint with no arguments in an isolated
root (`unshare --mount --pid --net --fork chroot`, as uid 2000) with TLS material at /tls/server,
and sends it, from inside its network namespace (image_client.py), a request recorded from an
example converging in-process; the image must answer exactly what the in-process function
answers. Needs root and Debian's debootstrap: CI has both (CI=true
makes their absence a failure).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane import package
from modelplane.main import cli
from modelplane.pipeline import repository_functions

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "_output"
FUNCTIONS = package.functions()
# Sends the request from inside the image's network namespace.
CLIENT = Path(__file__).with_name("image_client.py")
TOOLS = ("debootstrap", "dpkg-deb", "unshare", "nsenter", "chroot", "openssl", "tar", "skopeo")


def _missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "building and starting images needs root (debootstrap, chroot)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    return f"missing {', '.join(missing)} (apt-get install debootstrap skopeo)" if missing else None


@pytest.fixture(scope="module")
def images() -> dict[str, Path]:
    """Every function's amd64 tarball, built by the real command."""
    if reason := _missing_prerequisite():
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the image smoke test: {reason}")
        pytest.skip(reason)
    result = CliRunner().invoke(cli, ["package", "--arch", "amd64", "--output", str(OUTPUT)])
    assert result.exit_code == 0, result.output
    print(result.output)  # sizes and build times, for the CI log
    return {name: OUTPUT / "functions" / f"{name}-amd64.tar" for name in FUNCTIONS}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost and a client certificate, made with openssl."""
    directory = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.crt",
    )  # fmt: skip
    for who, extension in (("tls", "subjectAltName=DNS:localhost"), ("client", "")):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}",
            "-keyout", f"{who}.key", "-out", f"{who}.csr",
        )  # fmt: skip
        (directory / f"{who}.ext").write_text(extension + "\n")
        openssl(
            "x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-out", f"{who}.crt", "-extfile", f"{who}.ext",
        )  # fmt: skip
    return directory


@pytest.fixture(scope="module")
def base_root(images: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared base layer unpacked once; each function's root is a hard-linked copy."""
    root = tmp_path_factory.mktemp("base") / "root"
    root.mkdir()
    _, layers = package.read_image(images[FUNCTIONS[0]])
    subprocess.run(["tar", "-x", "-C", str(root)], input=layers[0], check=True)
    return root


def test_every_image_shares_one_base_layer_and_stays_small(images: dict[str, Path]) -> None:
    bases = set()
    for name, path in images.items():
        with tarfile.open(path) as tar:
            manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
            assert "index.json" in tar.getnames()  # the OCI layout too
        config, layers = package.read_image(path)
        assert manifest[0]["RepoTags"] == [f"modelplane/{name}:v0.1.0"]
        assert (config["architecture"], config["os"]) == ("amd64", "linux")
        assert config["config"]["Entrypoint"] == [f"/venv/fn/bin/{name}"]
        assert config["config"]["User"] == "2000:2000"
        assert list(config["config"]["ExposedPorts"]) == ["9443/tcp"]
        bases.add(config["rootfs"]["diff_ids"][0])
        assert sum(len(layer) for layer in layers) < 150_000_000, f"{name} is too large"
    assert len(bases) == 1


def test_another_tool_reads_both_layouts_and_verifies_every_digest(
    images: dict[str, Path], tmp_path: Path
) -> None:
    """skopeo (containers/image, not our code) reads the tarball as a docker-save archive and
    as an OCI archive, and copying it checks each layer against the config's diff_ids."""
    path = images["compose-model-deployment"]
    for transport in ("docker-archive", "oci-archive"):
        shown = subprocess.run(
            ["skopeo", "inspect", f"{transport}:{path}"], capture_output=True, text=True, check=True
        )
        assert json.loads(shown.stdout)["Architecture"] == "amd64"
    copied = subprocess.run(
        ["skopeo", "copy", "-q", f"docker-archive:{path}", f"oci:{tmp_path / 'copy'}:latest"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert copied.returncode == 0, copied.stderr


def _start(root: Path, entrypoint: str, log: Path) -> subprocess.Popen[bytes]:
    """The entrypoint with no arguments, as uid 2000, in its own mount, pid and network
    namespaces (as in a pod: its port 9443 is its own)."""
    # /dev and /proc come from the container runtime in a pod; here from the host, mounted
    # only inside the new mount namespace.
    script = 'mount --rbind /dev "$1/dev" && exec chroot --userspec=2000:2000 "$1" "$2"'
    command = [
        str(shutil.which("unshare")), "--mount", "--pid", "--net", "--fork", "--kill-child",
        f"--mount-proc={root}/proc", "/bin/sh", "-c", script, "sh", str(root), entrypoint,
    ]  # fmt: skip
    env = {"TLS_SERVER_CERTS_DIR": "/tls/server", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    # Until unshare has made the namespaces it is still in the host's, and a client entering
    # its network namespace then would reach whatever serves 9443 on the host.
    host = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while os.readlink(f"/proc/{process.pid}/ns/net") == host and time.monotonic() < deadline:
        time.sleep(0.01)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill the function (pid 1 of its namespace: only SIGKILL reaches it from outside);
    unshare, which ignores SIGTERM while it waits, then exits."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    if children.exists():
        for pid in children.read_text().split():
            os.kill(int(pid), signal.SIGKILL)
    process.wait(timeout=30)


def _call(process: subprocess.Popen[bytes], tls: Path, request: fnv1.RunFunctionRequest,
          work: Path) -> tuple[fnv1.RunFunctionResponse | None, str]:  # fmt: skip
    """``request`` sent over mTLS from inside the function's network namespace
    (tests/packaging/image_client.py): the answer, or None and what went wrong."""
    asked, answered = work / "request.bin", work / "answer.bin"
    asked.write_bytes(request.SerializeToString())
    done = subprocess.run(
        [str(shutil.which("nsenter")), f"--net=/proc/{process.pid}/ns/net", sys.executable,
         str(CLIENT), str(tls), str(asked), str(answered)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None, f"image_client.py exited {done.returncode}: {done.stderr}"
    return fnv1.RunFunctionResponse.FromString(answered.read_bytes()), ""


@pytest.fixture
def running(
    request: pytest.FixtureRequest,
    images: dict[str, Path],
    base_root: Path,
    tls: Path,
    tmp_path: Path,
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    name = request.param
    root = tmp_path / "root"
    subprocess.run(["cp", "-al", str(base_root), str(root)], check=True)
    config, layers = package.read_image(images[name])
    for layer in layers[1:]:
        subprocess.run(["tar", "-x", "-C", str(root)], input=layer, check=True)
    server = root / "tls" / "server"
    server.mkdir(parents=True)
    for source, target in (("tls.crt", "tls.crt"), ("tls.key", "tls.key"), ("ca.crt", "ca.crt")):
        shutil.copy(tls / source, server / target)
        (server / target).chmod(0o644)  # readable by uid 2000, as Crossplane's secret mount
    log = tmp_path / "function.log"
    process = _start(root, config["config"]["Entrypoint"][0], log)
    try:
        yield process, log
    finally:
        _stop(process)


@pytest.mark.parametrize("running", FUNCTIONS, indirect=True)
def test_image_answers_run_function_over_mtls_like_the_source(
    running: tuple[subprocess.Popen[bytes], Path],
    recorded_requests: dict[str, fnv1.RunFunctionRequest],
    tls: Path,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    process, log = running
    name = request.node.callspec.params["running"]
    answer, failure = _call(process, tls, recorded_requests[name], tmp_path)
    assert answer is not None, f"{name}: {failure}\n{process.poll()=}\n{log.read_text()}"
    expected = repository_functions()[name].load()().run(recorded_requests[name])
    assert answer == expected
    assert not any("internal error" in r.message for r in answer.results), answer.results
    assert process.poll() is None, log.read_text()
    # Its one info line for the request, JSON by default (the log flushes line by line).
    deadline = time.monotonic() + 10
    while not (lines := _request_lines(log)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [line["function"] for line in lines] == [name], log.read_text()


def _request_lines(log: Path) -> list[dict]:
    found = []
    for text in log.read_text().splitlines():
        if text.startswith("{"):
            line = json.loads(text)
            if line.get("msg") == "RunFunction" and line.get("level") == "info":
                found.append(line)
    return found
