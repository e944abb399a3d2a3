"""``modelplane package``: one runtime image tarball per function and architecture, no daemon.

Each image has two layers (design/packaging.md):

1. a Debian 12 base holding only what ``python3.11`` needs at run time, unpacked from Debian's
   own packages (``debootstrap --download-only`` fetches and verifies them; ``dpkg-deb -x``
   unpacks the chosen ones, as distroless images are made: no maintainer scripts, no shell
   needed). It is byte-identical for every function of one architecture;
2. the function's virtualenv at ``/venv/fn``, installed non-editable from the workspace with
   ``uv pip install --python-platform``, so arm64 wheels resolve on an amd64 machine.

The tarball is in ``docker save`` layout (top-level ``manifest.json``, which
``crossplane project build`` needs) with an OCI ``index.json`` beside it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable
from pathlib import Path

from modelplane import repo

SUITE = "bookworm"
# A cached base older than this is built again from freshly downloaded packages.
BASE_MAX_AGE = 7 * 24 * 3600
PYTHON = "python3.11"
VENV = "/venv/fn"
USER = "2000:2000"  # Crossplane's function pods run as uid 2000
PORT = 9443
VERSION = "v0.1.0"  # the tag in each tarball's manifest; the registry tag is set at push
# Fixed timestamps make the base layer reproducible, so its digest is the same in every build.
EPOCH = 0
ARCHITECTURES = {
    # Debian architecture -> (uv --python-platform, OCI variant)
    "amd64": ("x86_64-manylinux_2_36", None),
    "arm64": ("aarch64-manylinux_2_36", "v8"),
}
# What the interpreter links against and reads at run time (bookworm's glibc is 2.36).
BASE_PACKAGES = ("python3.11-minimal", "libpython3.11-stdlib", "netbase", "tzdata", "libstdc++6")
# Dependencies a running interpreter never uses: package tooling and configuration frontends.
NOT_NEEDED = frozenset({"debconf", "debconf-2.0", "perl-base", "dpkg", "install-info"})
# Paths in the base nobody reads at run time.
PRUNE = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/bug",
    "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/pydoc_data",
    "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/turtledemo",
)

_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


class PackageError(Exception):
    """The build cannot go on; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class Built:
    """One image tarball."""

    function: str
    arch: str
    path: Path
    size: int  # uncompressed bytes of all layers
    layers: tuple[str, ...]  # layer digests, base first
    seconds: float


# --------------------------------------------------------------------------------------------
# The Debian base


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses for bookworm (never written in the code)."""
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for paragraph in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                (key.strip().lower(), value.strip())
                for key, _, value in (
                    line.partition(":") for line in paragraph.splitlines() if ":" in line
                )
                if not key.startswith("#")
            )
            if (
                "deb" in fields.get("types", "").split()
                and SUITE in fields.get("suites", "").split()
                and fields.get("enabled", "yes") != "no"
                and fields.get("uris")
            ):
                return fields["uris"].split()[0]
    lists = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for path in lists:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    raise PackageError(
        f"no Debian {SUITE} source in {apt_dir}/sources.list(.d): modelplane package fetches "
        f"the base image's packages from the mirror apt uses"
    )


def _require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise PackageError(
            f"missing {', '.join(missing)}: install with `apt-get install debootstrap` "
            f"(Debian or Ubuntu, as root)"
        )


def _download(arch: str, debs: Path) -> None:
    """Fetch (and verify against Debian's keyring) the packages of a minimal base."""
    if (debs / ".complete").exists():
        return
    _require_tools("debootstrap", "dpkg-deb")
    if os.geteuid() != 0:
        raise PackageError("debootstrap needs root: run modelplane package as root")
    shutil.rmtree(debs, ignore_errors=True)
    debs.parent.mkdir(parents=True, exist_ok=True)
    command = [
        "debootstrap",
        "--download-only",
        "--variant=minbase",
        f"--arch={arch}",
        f"--include={','.join(BASE_PACKAGES)}",
        SUITE,
        str(debs),
        debian_mirror(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PackageError(f"debootstrap failed for {arch}:\n{done.stdout[-2000:]}{done.stderr}")
    (debs / ".complete").touch()


def _deb_index(debs: Path) -> dict[str, Path]:
    return {p.name.split("_")[0]: p for p in (debs / "var/cache/apt/archives").glob("*.deb")}


def _depends(deb: Path) -> list[list[str]]:
    """A package's Pre-Depends and Depends as alternatives, names only."""
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Pre-Depends", "Depends"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    value = " ".join(
        line.partition(":")[2] if ":" in line.split(" ")[0] else line
        for line in fields.splitlines()
    )
    return [
        [re.split(r"[\s(:]", alt.strip())[0] for alt in group.split("|")]
        for group in value.split(",")
        if group.strip()
    ]


def base_packages(debs: Path) -> list[str]:
    """The closure of BASE_PACKAGES over Depends, minus what a running interpreter never uses."""
    index = _deb_index(debs)
    chosen: set[str] = set()
    todo = list(BASE_PACKAGES)
    while todo:
        name = todo.pop()
        if name in chosen or name in NOT_NEEDED:
            continue
        if name not in index:
            raise PackageError(f"package {name} was not downloaded by debootstrap")
        chosen.add(name)
        for alternatives in _depends(index[name]):
            present = [a for a in alternatives if a in index or a in NOT_NEEDED]
            if present:
                todo.append(present[0])
    return sorted(chosen)


def _base_root(debs: Path, root: Path) -> None:
    index = _deb_index(debs)
    for name in base_packages(debs):
        subprocess.run(["dpkg-deb", "-x", str(index[name]), str(root)], check=True)
    for relative in PRUNE:
        shutil.rmtree(root / relative, ignore_errors=True)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/sbin/nologin\nfunction:x:2000:2000:function:/:/sbin/nologin\n"
    )
    (etc / "group").write_text("root:x:0:\nfunction:x:2000:\n")
    for directory in ("tmp", "tls", "proc", "dev"):
        (root / directory).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)


def default_cache() -> Path:
    """Where the downloaded packages and base layers are kept, shared by every clone and
    output folder as Go's and uv's caches are: ``MODELPLANE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/modelplane/package``, else ``~/.cache/modelplane/package``."""
    if chosen := os.environ.get("MODELPLANE_CACHE_DIR"):
        return Path(chosen)
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(home) / "modelplane" / "package"


def base_layer(arch: str, cache: Path) -> Path:
    """The base layer tar for ``arch``, built once and reused from ``cache`` for up to
    ``BASE_MAX_AGE``; then its packages are downloaded again, so images pick up Debian's
    updates within a week. Two builds sharing a cache (two test workers, two clones) take
    turns: two debootstraps into one folder break each other."""
    layer = cache / f"base-{arch}.tar"
    debs = cache / f"debs-{arch}"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f".base-{arch}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layer.exists() and time.time() - layer.stat().st_mtime < BASE_MAX_AGE:
            return layer
        layer.unlink(missing_ok=True)
        (debs / ".complete").unlink(missing_ok=True)
        _download(arch, debs)
        with tempfile.TemporaryDirectory(prefix=f"modelplane-base-{arch}-") as tmp:
            root = Path(tmp)
            _base_root(debs, root)
            _write_layer(root, layer)
    return layer


def _partial(target: Path) -> Path:
    """Where ``target`` is written before it is renamed into place, this process's own: a
    reader never sees half a file, and two writers never share one."""
    return target.with_name(f".{target.name}.{os.getpid()}.partial")


# --------------------------------------------------------------------------------------------
# The function layer


def _uv(*args: str, failure: str) -> str:
    """Run uv in the repository; its stdout, or PackageError starting with ``failure``."""
    if found := shutil.which("uv"):
        uv = [found]
    elif python := shutil.which("python3"):
        uv = [python, "-m", "uv"]
    else:
        raise PackageError("uv is not installed: python3 -m pip install uv")
    done = subprocess.run(
        [*uv, *args], cwd=repo.root(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise PackageError(f"{failure}: {done.stderr}")
    return done.stdout


def console_script(function_dir: Path) -> str:
    """``module:callable`` of the function's console script (named after the function)."""
    project = tomllib.loads((function_dir / "pyproject.toml").read_text())["project"]
    scripts = project.get("scripts") or {}
    if function_dir.name not in scripts:
        raise PackageError(
            f"{function_dir}/pyproject.toml: no [project.scripts] {function_dir.name}"
        )
    return scripts[function_dir.name]


def _wheel(package: str, out: Path) -> Path:
    """A fresh wheel of a workspace package (never a cached build of older source)."""
    target = out / package
    _uv(
        "build", "--quiet", "--wheel", "--package", package, "--out-dir", str(target),
        failure=f"cannot build a wheel of {package}",
    )  # fmt: skip
    wheels = sorted(target.glob("*.whl"))
    if len(wheels) != 1:
        raise PackageError(f"cannot build a wheel of {package}: found {len(wheels)} wheels")
    return wheels[0]


def _venv(function: str, arch: str, stage: Path, wheels: list[Path]) -> str:
    """Install ``function`` non-editable into ``stage``/venv/fn; returns the entrypoint path.

    ``wheels`` are the workspace packages (the function's own and what it shares); everything
    else is pinned by uv.lock."""
    root = repo.root()
    venv = stage / VENV.lstrip("/")
    site = venv / "lib" / PYTHON / "site-packages"
    site.mkdir(parents=True)
    reqs = stage / "requirements.txt"
    reqs.write_text(
        _uv(
            "export", "--frozen", "--package", function, "--no-dev", "--no-emit-workspace",
            "--no-hashes", "--no-header", "--no-annotate",
            failure=f"uv export failed for {function}",
        )
    )  # fmt: skip
    _uv(
        "pip", "install", "--quiet", "--no-deps", "--target", str(site),
        "--python-version", "3.11", "--python-platform", ARCHITECTURES[arch][0],
        "-r", str(reqs), *map(str, wheels),
        failure=f"installing {function} for {arch} failed",
    )  # fmt: skip
    reqs.unlink()
    # cel-expr-python ships one native module per CEL extension (about 37 MB); Modelplane
    # enables extensions through its environment config and never imports them.
    shutil.rmtree(site / "cel_expr_python" / "ext", ignore_errors=True)
    # --target leaves console scripts pointing at this machine's interpreter; write our own.
    shutil.rmtree(site / "bin", ignore_errors=True)
    bin_dir = venv / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(f"/usr/bin/{PYTHON}")
    (bin_dir / "python3").symlink_to("python")
    (venv / "pyvenv.cfg").write_text(
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n"
    )
    module, _, attr = console_script(root / "functions" / function).partition(":")
    entrypoint = bin_dir / function
    entrypoint.write_text(
        f"#!{VENV}/bin/python\nimport sys\n\nfrom {module} import {attr}\n\nsys.exit({attr}())\n"
    )
    entrypoint.chmod(0o755)
    return f"{VENV}/bin/{function}"


# --------------------------------------------------------------------------------------------
# Layers and the image tarball


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = EPOCH
    return info


def _write_layer(root: Path, target: Path) -> None:
    """A reproducible tar of everything under ``root`` (sorted, root-owned, fixed times)."""
    tmp = _partial(target)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
            tar.add(
                path, arcname=path.relative_to(root).as_posix(), recursive=False, filter=_normalise
            )
    tmp.rename(target)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = _normalise(tarfile.TarInfo(name))
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_image(
    target: Path, arch: str, layers: list[Path], entrypoint: str, tag: str
) -> tuple[str, ...]:
    """Write a ``docker save`` + OCI layout tarball; returns the layer digests."""
    digests = [_sha256(layer) for layer in layers]
    variant = ARCHITECTURES[arch][1]
    config = {
        "architecture": arch,
        **({"variant": variant} if variant else {}),
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "User": USER,
            "Entrypoint": [entrypoint],
            "ExposedPorts": {f"{PORT}/tcp": {}},
            "Env": [f"PATH={VENV}/bin:/usr/bin:/bin"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in digests]},
        "history": [{"created_by": "modelplane package: Debian base"}]
        + [{"created_by": f"modelplane package: {entrypoint}"}] * (len(layers) - 1),
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": _OCI_MANIFEST,
        "config": {
            "mediaType": _OCI_CONFIG,
            "digest": f"sha256:{config_digest}",
            "size": len(config_bytes),
        },
        "layers": [
            {"mediaType": _OCI_LAYER, "digest": f"sha256:{d}", "size": layer.stat().st_size}
            for d, layer in zip(digests, layers, strict=True)
        ],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": _OCI_MANIFEST,
                "digest": f"sha256:{manifest_digest}",
                "size": len(manifest_bytes),
                "annotations": {
                    "io.containerd.image.name": tag,
                    "org.opencontainers.image.ref.name": tag.rpartition(":")[2],
                },
            }
        ],
    }
    docker_manifest = [
        {
            "Config": f"blobs/sha256/{config_digest}",
            "RepoTags": [tag],
            "Layers": [f"blobs/sha256/{d}" for d in digests],
        }
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(target)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        _add_bytes(tar, "manifest.json", json.dumps(docker_manifest).encode())
        _add_bytes(tar, f"blobs/sha256/{config_digest}", config_bytes)
        _add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest_bytes)
        for digest, layer in zip(digests, layers, strict=True):
            tar.add(layer, arcname=f"blobs/sha256/{digest}", filter=_normalise)
    tmp.rename(target)
    return tuple(f"sha256:{d}" for d in digests)


def functions() -> list[str]:
    """Every function directory of the repository."""
    return sorted(
        p.name for p in (repo.root() / "functions").iterdir() if (p / "pyproject.toml").exists()
    )


def build(
    output: Path,
    archs: Iterable[str],
    names: Iterable[str] | None = None,
    cache: Path | None = None,
) -> list[Built]:
    """Build ``<output>/functions/<name>-<arch>.tar`` for every function and architecture,
    on the base layers kept in ``cache`` (``default_cache()`` when None)."""
    archs = list(archs)
    unknown = [a for a in archs if a not in ARCHITECTURES]
    if unknown:
        raise PackageError(f"unsupported architecture {unknown[0]!r}: use amd64 or arm64")
    available = functions()
    chosen = list(names or available)
    missing = sorted(set(chosen) - set(available))
    if missing:
        raise PackageError(f"unknown function {missing[0]!r}: no functions/{missing[0]}")
    cache = cache or default_cache()
    built = []
    with tempfile.TemporaryDirectory(prefix="modelplane-wheels-") as wheel_dir:
        wheels = Path(wheel_dir)
        shared = [_wheel(p, wheels) for p in ("modelplane-common", "modelplane-schemas")]
        own = {function: _wheel(function, wheels) for function in chosen}
        for arch in archs:
            base = base_layer(arch, cache)
            for function in chosen:
                built.append(_image(function, arch, base, [*shared, own[function]], output))
    return built


def _image(function: str, arch: str, base: Path, wheels: list[Path], output: Path) -> Built:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"modelplane-{function}-") as tmp:
        stage = Path(tmp) / "root"
        entrypoint = _venv(function, arch, stage, wheels)
        layer = Path(tmp) / "layer.tar"
        _write_layer(stage, layer)
        target = output / "functions" / f"{function}-{arch}.tar"
        digests = write_image(
            target, arch, [base, layer], entrypoint, f"modelplane/{function}:{VERSION}"
        )
        size = base.stat().st_size + layer.stat().st_size
    return Built(function, arch, target, size, digests, time.monotonic() - started)


def read_image(path: Path) -> tuple[dict, list[bytes]]:
    """The config and the layer tars of a tarball this module wrote (via ``manifest.json``)."""
    with tarfile.open(path) as tar:
        manifest = json.loads(_member(tar, "manifest.json"))[0]
        config = json.loads(_member(tar, manifest["Config"]))
        layers = [_member(tar, name) for name in manifest["Layers"]]
    return config, layers


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    stream = tar.extractfile(name)
    if stream is None:
        raise PackageError(f"{name} is not a file in the image tarball")
    data = stream.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
