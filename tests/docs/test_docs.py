"""The user docs hold together: links resolve, the index is complete, and every Modelplane
manifest they show is one the API server would accept.

A YAML block that shows only part of an object on purpose (a status excerpt, an abridged
composed resource) carries a ``# partial`` comment and is not validated.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from modelplane.main import cli
from modelplane.project import installed_name
from modelplane.validation import validate_object
from modelplane.xrd import catalog

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKDOWN = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)
_YAML_FENCE = re.compile(r"^```ya?ml[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text a reader clicks in: no fenced blocks, no inline code."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in _HEADING.findall(_FENCE.sub("", path.read_text()))}


def _relative_links() -> list[tuple[Path, str]]:
    links = []
    for page in MARKDOWN:
        for target in _LINK.findall(_prose(page.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            links.append((page, target))
    return links


LINKS = _relative_links()


def test_the_docs_have_links_to_check() -> None:
    assert len(LINKS) > 50


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{_rel(p)}->{t}" for p, t in LINKS])
def test_relative_link_resolves(page: Path, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    resolved = (page.parent / path_part).resolve() if path_part else page
    assert resolved.exists(), f"{_rel(page)}: link {target!r} points at a missing file"
    if anchor and resolved.suffix == ".md":
        assert anchor in _anchors(resolved), (
            f"{_rel(page)}: link {target!r}: {_rel(resolved)} has no heading #{anchor}"
        )


_REPO_PATH = re.compile(
    r"(?<![\w/.<>$-])((?:examples|docs|apis|functions|bench|design|tests|cli|common|schemas)"
    r"/[A-Za-z0-9_./-]*)(?![<*${A-Za-z0-9_./-])"
)


def _mentioned_paths() -> list[tuple[Path, str]]:
    """Repository paths the docs tell a reader to open or run, in prose and in commands."""
    found = []
    for page in MARKDOWN:
        for mention in _REPO_PATH.findall(page.read_text()):
            path = mention.rstrip(".,:;")
            if not path.endswith("/."):
                found.append((page, path))
    return sorted(set(found))


PATHS = _mentioned_paths()


@pytest.mark.parametrize(("page", "path"), PATHS, ids=[f"{_rel(p)}:{t}" for p, t in PATHS])
def test_mentioned_repository_path_exists(page: Path, path: str) -> None:
    assert (ROOT / path).exists(), f"{_rel(page)} mentions {path}, which does not exist"


def _linked_from_index() -> set[Path]:
    index = DOCS / "README.md"
    return {
        (index.parent / t.partition("#")[0]).resolve()
        for p, t in LINKS
        if p == index and t.partition("#")[0]
    }


@pytest.mark.parametrize(
    "page",
    sorted(DOCS.glob("*.md")) + sorted((DOCS / "kinds").glob("*.md")),
    ids=_rel,
)
def test_docs_index_links_every_page(page: Path) -> None:
    if page.name == "README.md" and page.parent == DOCS:
        return
    assert page.resolve() in _linked_from_index(), f"docs/README.md does not link {_rel(page)}"


@pytest.mark.parametrize("page", sorted((ROOT / "design").glob("*.md")), ids=lambda p: p.name)
def test_docs_index_links_every_design_note(page: Path) -> None:
    assert page.resolve() in _linked_from_index(), f"docs/README.md does not link {_rel(page)}"


def _xrd_kinds() -> list[str]:
    kinds = []
    for path in sorted((ROOT / "apis").glob("*/definition.yaml")):
        kinds.append(yaml.safe_load(path.read_text())["spec"]["names"]["kind"])
    return kinds


@pytest.mark.parametrize("kind", _xrd_kinds())
def test_every_kind_has_a_reference_page(kind: str) -> None:
    page = DOCS / "kinds" / f"{kind.lower()}.md"
    assert page.exists(), f"no reference page for {kind}: expected {_rel(page)}"
    assert page.read_text().startswith(f"# {kind}\n")


def _is_modelplane(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str):
        return False
    group = obj["apiVersion"].partition("/")[0]
    return group == "modelplane.ai" or group.endswith(".modelplane.ai")


UNPARSEABLE: list[str] = []


def _documented_objects() -> list[tuple[str, dict[str, Any]]]:
    """Every object in a ``yaml`` block of the docs and every manifest under docs/manifests."""
    found: list[tuple[str, dict[str, Any]]] = []
    for page in sorted(DOCS.rglob("*.md")):
        for number, block in enumerate(_YAML_FENCE.findall(page.read_text())):
            if "# partial" in block:
                continue
            where = f"{_rel(page)} yaml block {number}"
            try:
                docs = list(yaml.safe_load_all(block))
            except yaml.YAMLError as err:
                UNPARSEABLE.append(f"{where}: {err}")
                continue
            found += [(where, d) for d in docs if isinstance(d, dict)]
    for manifest in sorted((DOCS / "manifests").rglob("*.yaml")):
        found += [
            (_rel(manifest), d)
            for d in yaml.safe_load_all(manifest.read_text())
            if isinstance(d, dict)
        ]
    return found


OBJECTS = _documented_objects()
MODELPLANE_OBJECTS = [(w, o) for w, o in OBJECTS if _is_modelplane(o)]


def _object_id(item: tuple[str, dict[str, Any]]) -> str:
    where, obj = item
    return f"{where}:{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def test_every_yaml_block_parses_unless_marked_partial() -> None:
    assert UNPARSEABLE == []


def test_every_kind_page_shows_a_complete_example() -> None:
    shown = {o["kind"] for w, o in MODELPLANE_OBJECTS if w.startswith("docs/kinds/")}
    assert shown == set(_xrd_kinds())


@pytest.mark.parametrize(
    "item", MODELPLANE_OBJECTS, ids=[_object_id(i) for i in MODELPLANE_OBJECTS]
)
def test_documented_modelplane_object_is_valid(item: tuple[str, dict[str, Any]]) -> None:
    where, obj = item
    problems = validate_object(obj, source=where)
    assert problems == [], "\n".join(str(p) for p in problems)


INSTALL_OBJECTS = [(w, o) for w, o in OBJECTS if w.startswith("docs/manifests/")]


@pytest.mark.parametrize("item", INSTALL_OBJECTS, ids=[_object_id(i) for i in INSTALL_OBJECTS])
def test_install_manifest_is_valid_where_a_schema_exists(item: tuple[str, dict[str, Any]]) -> None:
    """Namespaces and RBAC are checked against the Kubernetes schemas; Crossplane package kinds
    (Provider, Function, DeploymentRuntimeConfig, ImageConfig) have no schema offline."""
    where, obj = item
    problems = [
        p for p in validate_object(obj, source=where) if not p.message.startswith("no schema for")
    ]
    assert problems == [], "\n".join(str(p) for p in problems)


def test_install_configuration_is_the_project_and_compositions_use_its_function_names() -> None:
    """One install route: the Configuration the project pushes; every functionRef is the name
    Crossplane installs an embedded function as (packaging.md §3)."""
    project = yaml.safe_load((ROOT / "crossplane-project.yaml").read_text())
    (configuration,) = [o for _, o in INSTALL_OBJECTS if o.get("kind") == "Configuration"]
    assert configuration["spec"]["package"].rpartition(":")[0] == project["spec"]["repository"]
    installed = {
        installed_name(f["tarball"]["name"], project["spec"]["repository"])
        for f in project["spec"]["functions"]
    }
    used = set()
    for path in (ROOT / "apis").glob("*/composition.yaml"):
        composition = yaml.safe_load(path.read_text())
        used |= {s["functionRef"]["name"] for s in composition["spec"]["pipeline"]}
    assert used == installed


def test_autoscaler_recipes_target_a_scalable_modelplane_kind() -> None:
    """KEDA ScaledObjects in the docs validate against the ScaledObject schema and scale a
    Modelplane kind whose scale subresource has a selector, within its replicas bounds."""
    scaled = [(w, o) for w, o in OBJECTS if o.get("kind") == "ScaledObject"]
    assert scaled, "docs/manifests/keda-autoscaling.yaml is the autoscaling recipe"
    for where, obj in scaled:
        assert validate_object(obj, source=where) == [], where
        target = obj["spec"]["scaleTargetRef"]
        definition = catalog().definition_for(target["apiVersion"], target["kind"])
        assert definition is not None, where
        (version,) = definition.body["spec"]["versions"]
        scale = version["subresources"]["scale"]
        assert scale["labelSelectorPath"] == ".status.selector", where
        replicas = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
            "replicas"
        ]
        low, high = obj["spec"]["minReplicaCount"], obj["spec"]["maxReplicaCount"]
        assert replicas["minimum"] <= low <= high <= replicas["maximum"], where
        assert all(t["type"] == "prometheus" for t in obj["spec"]["triggers"]), where


def test_validate_refuses_a_broken_autoscaler_recipe(tmp_path: Path) -> None:
    """A ScaledObject whose trigger lacks metadata and whose threshold is a number is refused by
    `modelplane validate`, naming the fields (as KEDA's CRD schema refuses it)."""
    recipe = yaml.safe_load((ROOT / "docs/manifests/keda-autoscaling.yaml").read_text())
    recipe["spec"]["triggers"].append({"type": "prometheus"})
    recipe["spec"]["triggers"][0]["metadata"]["threshold"] = 8
    path = tmp_path / "scaledobject.yaml"
    path.write_text(yaml.safe_dump(recipe))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 1, result.output
    assert "spec.triggers[1].metadata: Required value" in result.output
    # The API server's words: a map's key joined with a dot, kube-openapi's InvalidType.
    assert (
        'spec.triggers[0].metadata.threshold: Invalid value: "integer": '
        'spec.triggers[0].metadata.threshold in body must be of type string: "integer"'
    ) in result.output
