"""`modelplane package` input errors and the Debian mirror it reads from apt's configuration
(no network, no root: these fail before anything is downloaded)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from modelplane import package
from modelplane.main import cli


def test_an_unknown_architecture_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["package", "--arch", "amd64,riscv64", "--output", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "unsupported architecture 'riscv64': use amd64 or arm64" in result.output
    assert not (tmp_path / "functions").exists()


def test_an_unknown_function_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["package", "--function", "compose-nothing", "--output", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "unknown function 'compose-nothing': no functions/compose-nothing" in result.output


def test_the_mirror_comes_from_deb822_sources(tmp_path: Path) -> None:
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    (sources / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb deb-src\n# a comment\nURIs: http://mirror.invalid/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert package.debian_mirror(tmp_path) == "http://mirror.invalid/debian"


def test_the_mirror_comes_from_a_one_line_sources_list(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://old.invalid/debian bookworm main\n"
        "deb [signed-by=/usr/share/keyrings/k.gpg] http://mirror.invalid/debian bookworm main\n"
    )
    assert package.debian_mirror(tmp_path) == "http://mirror.invalid/debian"


def test_no_bookworm_source_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    with pytest.raises(package.PackageError, match="no Debian bookworm source"):
        package.debian_mirror(tmp_path)


def test_builds_sharing_a_cache_make_its_base_once_and_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both test workers (or two CI jobs) may package at once into one cache: the base is
    downloaded and built by one of them, and the other reuses it."""
    inside, most, downloads = 0, 0, []
    guard = threading.Lock()

    def download(arch: str, debs: Path) -> None:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
            downloads.append(arch)
        time.sleep(0.3)  # long enough for the other build to arrive meanwhile
        with guard:
            inside -= 1

    monkeypatch.setattr(package, "_download", download)
    monkeypatch.setattr(package, "_base_root", lambda debs, root: (root / "etc").mkdir())
    layers: list[Path] = []
    builds = [
        threading.Thread(target=lambda: layers.append(package.base_layer("amd64", tmp_path)))
        for _ in range(2)
    ]
    for build in builds:
        build.start()
    for build in builds:
        build.join()
    assert downloads == ["amd64"] and most == 1
    assert layers == [tmp_path / "base-amd64.tar"] * 2 and layers[0].is_file()
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"MODELPLANE_CACHE_DIR": "/srv/mp", "XDG_CACHE_HOME": "/xdg"}, "/srv/mp"),
        ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/modelplane/package"),
        ({"HOME": "/home/ci"}, "/home/ci/.cache/modelplane/package"),
    ],
)
def test_the_base_is_cached_where_every_clone_finds_it(
    environment: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not under --output: a fresh clone (CI's every run) reuses the packages an earlier
    clone downloaded, as Go's and uv's caches are reused."""
    for name in ("MODELPLANE_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert package.default_cache() == Path(expected)


def test_a_base_older_than_a_week_is_built_again_from_fresh_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Images pick up Debian's updates: a cached base is reused for a week, then its packages
    are downloaded again (the old download's completion mark is gone first)."""
    downloads: list[bool] = []

    def download(arch: str, debs: Path) -> None:
        downloads.append((debs / ".complete").exists())
        debs.mkdir(parents=True, exist_ok=True)
        (debs / ".complete").touch()

    monkeypatch.setattr(package, "_download", download)
    monkeypatch.setattr(package, "_base_root", lambda debs, root: (root / "etc").mkdir())
    layer = package.base_layer("arm64", tmp_path)
    assert package.base_layer("arm64", tmp_path) == layer
    assert downloads == [False]  # the second build reused the first's base
    week_old = time.time() - package.BASE_MAX_AGE - 60
    os.utime(layer, (week_old, week_old))
    assert package.base_layer("arm64", tmp_path) == layer
    assert downloads == [False, False]  # downloaded again, not taken from the old mark
    assert time.time() - layer.stat().st_mtime < 60
