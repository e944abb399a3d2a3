"""The repository hangs together: every function is packaged, listed and used, and the project
file is one the real `crossplane project build` reads (spec packaging.md §3)."""

import re
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema
import yaml
from modelplane.project import REPOSITORY, function_directory, installed_name

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = sorted(
    p.name for p in (ROOT / "functions").iterdir() if (p / "pyproject.toml").exists()
)


def _compositions() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "apis").rglob("*.yaml")):
        docs += [
            d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "Composition"
        ]
    return docs


PROJECT = yaml.safe_load((ROOT / "crossplane-project.yaml").read_text())


def _strict(properties: dict, required: tuple[str, ...] = ()) -> dict:
    """An object schema that rejects unknown fields (the real tool silently drops them)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_STRING = {"type": "string", "minLength": 1}
_XPKG = _strict(
    {
        "apiVersion": _STRING,
        "kind": {"enum": ["Provider", "Function", "Configuration"]},
        "package": _STRING,
        "version": _STRING,
        "apiOnly": {"type": "boolean"},
    },
    ("apiVersion", "kind", "package", "version"),
)
# dev.crossplane.io/v1alpha1 Project, as packaging.md §3 describes it.
PROJECT_SCHEMA = _strict(
    {
        "apiVersion": {"const": "dev.crossplane.io/v1alpha1"},
        "kind": {"const": "Project"},
        "metadata": _strict({"name": _STRING}, ("name",)),
        "spec": _strict(
            {
                "repository": _STRING,
                **{k: _STRING for k in ("maintainer", "source", "license", "description")},
                "readme": _STRING,
                "crossplane": _strict({"version": _STRING}, ("version",)),
                "dependencies": {
                    "type": "array",
                    "items": {
                        "oneOf": [
                            _strict({"type": {"const": "xpkg"}, "xpkg": _XPKG}, ("type", "xpkg")),
                            _strict(
                                {
                                    "type": {"const": "crd"},
                                    "git": _strict(
                                        {"repository": _STRING, "ref": _STRING, "path": _STRING},
                                        ("repository",),
                                    ),
                                    "http": _strict({"url": _STRING}, ("url",)),
                                },
                                ("type",),
                            ),
                            _strict(
                                {"type": {"const": "k8s"}, "k8s": _strict({"version": _STRING})},
                                ("type", "k8s"),
                            ),
                        ]
                    },
                },
                "functions": {
                    "type": "array",
                    "items": {
                        "oneOf": [
                            _strict(
                                {
                                    "source": {"const": "Directory"},
                                    "directory": _strict({"name": _STRING}, ("name",)),
                                },
                                ("source", "directory"),
                            ),
                            _strict(
                                {
                                    "source": {"const": "Tarball"},
                                    "tarball": _strict(
                                        {"name": _STRING, "pathPrefix": _STRING},
                                        ("name", "pathPrefix"),
                                    ),
                                },
                                ("source", "tarball"),
                            ),
                        ]
                    },
                },
                "paths": _strict(
                    {
                        k: _STRING
                        for k in ("apis", "functions", "examples", "tests", "operations", "schemas")
                    }
                ),
                "architectures": {"type": "array", "items": {"enum": ["amd64", "arm64"]}},
                "schemas": _strict(
                    {
                        "languages": {
                            "type": "array",
                            "items": {"enum": ["go", "json", "kcl", "python", "rust"]},
                        }
                    }
                ),
                "imageConfigs": {"type": "array"},
            },
            ("repository",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)


def test_project_file_has_no_field_the_real_tool_would_drop():
    jsonschema.validate(PROJECT, PROJECT_SCHEMA)


def test_project_schema_rejects_the_old_format():
    """The schema can fail: the pre-v1alpha1 entries ({name, path, language}, dependsOn)."""
    old = {**PROJECT, "spec": {**PROJECT["spec"], "dependsOn": []}}
    errors = list(jsonschema.Draft202012Validator(PROJECT_SCHEMA).iter_errors(old))
    assert errors and "dependsOn" in errors[0].message
    old["spec"] = {**PROJECT["spec"], "functions": [{"name": "x", "path": "functions/x"}]}
    assert list(jsonschema.Draft202012Validator(PROJECT_SCHEMA).iter_errors(old))


def test_project_builds_every_function_from_its_tarball_for_both_architectures():
    spec = PROJECT["spec"]
    assert spec["repository"] == REPOSITORY
    assert spec["architectures"] == ["amd64", "arm64"]
    assert spec["crossplane"]["version"] == ">=v2.3.0"
    assert spec["functions"] == [
        {"source": "Tarball", "tarball": {"name": n, "pathPrefix": f"_output/functions/{n}"}}
        for n in FUNCTIONS
    ]


def test_every_composition_references_the_name_crossplane_installs():
    for composition in _compositions():
        assert composition["spec"]["mode"] == "Pipeline"
        for step in composition["spec"]["pipeline"]:
            name = step["functionRef"]["name"]
            assert function_directory(name) in FUNCTIONS, (
                f"{composition['metadata']['name']}: step {step['step']} names an unknown function"
            )
            assert name == installed_name(function_directory(name))


def test_installed_names_follow_the_package_path():
    assert installed_name("compose-model-deployment") == (
        "modelplane-modelplanecompose-model-deployment"
    )
    assert function_directory("modelplane-modelplanecompose-usages") == "compose-usages"
    assert function_directory("compose-usages") == "compose-usages"


def test_every_function_is_used_by_a_composition():
    used = {
        function_directory(s["functionRef"]["name"])
        for c in _compositions()
        for s in c["spec"]["pipeline"]
    }
    assert sorted(set(FUNCTIONS) - used) == []


def test_every_function_module_name_is_unique_and_importable_by_entry_point():
    names = {ep.name for ep in entry_points(group="modelplane.functions")}
    assert names == set(FUNCTIONS)


# A managed-resource API group as the functions spell it, dotted in apiVersions
# ("eks.aws.m.upbound.io") or underscored in generated-model imports ("eks_aws_m_upbound_io").
_MANAGED_GROUP = re.compile(
    r"(?<![\w.])([a-z0-9]+)(?:\.([a-z0-9]+))?\.m\.(upbound|crossplane)\.io\b"
    r"|(?<!\w)([a-z0-9]+)(?:_([a-z0-9]+))?_m_(upbound|crossplane)_io\b"
)


_FAMILIES = ("aws", "azure", "gcp")
_MONOLITHIC = ("vultr", "nebius")


def _provider_package(match: re.Match[str]) -> str:
    """The package serving a managed group: provider-<cloud>-<service> for the Upbound
    families (eks.aws -> provider-aws-eks), provider-<service> otherwise (helm -> provider-helm)."""
    service, cloud = (match[1], match[2]) if match[1] else (match[4], match[5])
    name = f"provider-{cloud}-{service}" if cloud else f"provider-{service}"
    if not cloud and service in _FAMILIES:
        # A cloud's bare group (azure.m.upbound.io: ResourceGroup) is its family provider's.
        name = f"provider-family-{service}"
    if (cloud or service) in _MONOLITHIC:
        # One package serves every group of such a provider (vke.vultr -> provider-vultr).
        name = f"provider-{cloud or service}"
    return f"xpkg.upbound.io/upbound/{name}"


def test_project_depends_on_every_provider_the_functions_compose_for():
    sources = [*ROOT.glob("functions/*/src/**/*.py"), *ROOT.glob("common/src/**/*.py")]
    needed = {
        _provider_package(match)
        for path in sources
        for match in _MANAGED_GROUP.finditer(path.read_text())
    }
    assert "xpkg.upbound.io/upbound/provider-aws-eks" in needed  # the scan finds them
    depends = {d["xpkg"]["package"]: d["xpkg"] for d in PROJECT["spec"]["dependencies"]}
    assert sorted(needed - set(depends)) == []
    assert sorted(set(depends) - needed) == [], "a dependency nothing composes for"
    assert all(d.get("version") for d in depends.values()), "every dependency pins a version"


def test_configuration_metadata_depends_on_what_the_project_declares():
    """package/crossplane.yaml (the xpkg build route) says what the project build produces:
    the Crossplane constraint, every function at this project's repository, every provider."""
    meta = yaml.safe_load((ROOT / "package" / "crossplane.yaml").read_text())
    assert (meta["apiVersion"], meta["kind"]) == ("meta.pkg.crossplane.io/v1", "Configuration")
    spec = PROJECT["spec"]
    assert meta["spec"]["crossplane"] == spec["crossplane"]
    functions = [
        {
            "apiVersion": "pkg.crossplane.io/v1beta1",
            "kind": "Function",
            "package": f"{spec['repository']}_{name}",
            "version": ">=v0.1.0",
        }
        for name in FUNCTIONS
    ]
    assert meta["spec"]["dependsOn"] == functions + [d["xpkg"] for d in spec["dependencies"]]


def test_every_function_has_package_metadata():
    for name in FUNCTIONS:
        meta = yaml.safe_load(
            (ROOT / "functions" / name / "package" / "crossplane.yaml").read_text()
        )
        assert (meta["apiVersion"], meta["kind"]) == ("meta.pkg.crossplane.io/v1beta1", "Function")
        assert meta["metadata"]["name"] == name
        assert meta["spec"]["crossplane"] == PROJECT["spec"]["crossplane"]


def test_release_workflow_packages_both_architectures_and_pushes_on_a_tag():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yaml").read_text())
    trigger = workflow[True]  # YAML 1.1 reads the key `on` as a boolean
    assert trigger == {"push": {"tags": ["v*"]}}
    (job,) = workflow["jobs"].values()
    commands = "\n".join(step.get("run", "") for step in job["steps"])
    assert "modelplane package --arch amd64,arm64 --output _output" in commands
    assert "debootstrap" in commands  # no Docker daemon: the base comes from Debian's packages
    build, push = commands.index("crossplane project build"), commands.index("project push")
    assert commands.index("modelplane package") < build < push
