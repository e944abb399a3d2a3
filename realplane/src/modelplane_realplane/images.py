"""Run each function from its built image, as Crossplane's runtime would run it.

The image tarballs come from ``modelplane package --arch amd64``. The shared base layer is
unpacked once; each function's root is a hard-linked copy with its own layer on top and its
TLS material at ``/tls/server``. The entrypoint runs as uid 2000 in its own mount and PID
namespaces (``unshare … chroot``), serving mTLS. The one difference from a pod: the port, so
twelve functions share the machine's loopback (``--address=127.0.0.1:<port>``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from modelplane import package

from modelplane_realplane.paths import REPOSITORY

OUTPUT = REPOSITORY / "_output"
USER = "2000:2000"


def tarball(name: str, arch: str = "amd64") -> Path:
    return OUTPUT / "functions" / f"{name}-{arch}.tar"


def _newest_source(name: str) -> float:
    """When the newest file an image of function ``name`` is built from last changed."""
    roots = [REPOSITORY / "functions" / name, REPOSITORY / "common", REPOSITORY / "schemas",
             REPOSITORY / "uv.lock"]  # fmt: skip
    newest = 0.0
    for root in roots:
        files = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" not in path.parts:
                newest = max(newest, path.stat().st_mtime)
    return newest


def ensure_amd64(rebuild: bool = False) -> dict[str, Path]:
    """Every function's amd64 image, built by ``modelplane package`` where missing or older
    than its sources (the real plane must judge the code in the tree)."""
    names = package.functions()
    missing = [name for name in names if rebuild or not tarball(name).is_file()
               or tarball(name).stat().st_mtime < _newest_source(name)]  # fmt: skip
    if missing:
        package.build(OUTPUT, ["amd64"], missing)
    return {name: tarball(name) for name in names}


def unpack_base(tarballs: dict[str, Path], roots: Path) -> Path:
    """The base layer every image shares, unpacked once."""
    base = roots / ".base"
    base.mkdir(parents=True)
    _, layers = package.read_image(next(iter(tarballs.values())))
    subprocess.run(["tar", "-x", "-C", str(base)], input=layers[0], check=True)
    return base


def unpack_function(base: Path, image: Path, root: Path, pki: Path) -> Path:
    """``root``: the base hard-linked, the function's layers on top, TLS at /tls/server."""
    subprocess.run(["cp", "-al", str(base), str(root)], check=True)
    _, layers = package.read_image(image)
    for layer in layers[1:]:
        subprocess.run(["tar", "-x", "-C", str(root)], input=layer, check=True)
    server = root / "tls" / "server"
    server.mkdir(parents=True)
    for source, target in (("serving.crt", "tls.crt"), ("serving.key", "tls.key"),
                           ("ca.crt", "ca.crt")):  # fmt: skip
        shutil.copy(pki / source, server / target)
        (server / target).chmod(0o644)  # readable by uid 2000, as Crossplane's secret mount
    return root


def entrypoint(image: Path) -> str:
    config, _ = package.read_image(image)
    return str(config["config"]["Entrypoint"][0])


def command(root: Path, image: Path, port: int) -> list[str]:
    """The image's entrypoint in an isolated root, as uid 2000, serving on ``port``."""
    # /dev and /proc come from the container runtime in a pod; here from the host, mounted
    # only inside the new mount namespace.
    script = 'mount --rbind /dev "$1/dev" && exec chroot --userspec="$2" "$1" "$3" "$4"'
    unshare = shutil.which("unshare") or "unshare"
    return [
        unshare, "--mount", "--pid", "--fork", "--kill-child", f"--mount-proc={root}/proc",
        "/bin/sh", "-c", script, "sh", str(root), USER, entrypoint(image),
        f"--address=127.0.0.1:{port}",
    ]  # fmt: skip
