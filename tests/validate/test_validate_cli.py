"""`modelplane validate PATH...` driven as a user does: exit codes, stderr, summary line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli

GOOD_CLASS = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: l4
spec:
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
"""

BAD_CLASS = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: broken
spec:
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    count: 100
"""


def run(*args: str):
    result = CliRunner().invoke(cli, ["validate", *args])
    # Never a traceback: the only exception allowed is the exit itself.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output + result.stderr
    return result


def test_the_repository_apis_are_valid():
    result = run(str(repo.root() / "apis"))
    assert result.exit_code == 0, result.stderr
    documents = sum(
        1
        for path in (repo.root() / "apis").rglob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    )
    assert result.stdout.strip() == f"{documents} objects valid"


def test_apis_and_examples_together():
    """The examples belong to every feature; whatever their state, each problem is one
    well-formed line naming a file under examples/ and the exit code says whether any exist.
    Warnings (references to objects outside the files: test_validate_references) never fail."""
    result = run(str(repo.root() / "apis"), str(repo.root() / "examples"))
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
    *problems, summary = lines or [result.stdout.strip()]
    assert result.exit_code == (1 if problems else 0)
    assert summary.split(" ")[1] in ("object", "objects")
    for line in problems:
        assert re.match(r"^\S*examples/\S+\.ya?ml: \w+/\S+: ", line), line


def test_every_problem_is_printed_with_file_kind_name_and_path(tmp_path: Path):
    manifest = tmp_path / "classes.yaml"
    manifest.write_text(GOOD_CLASS + "---\n" + BAD_CLASS)
    result = run(str(tmp_path))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    name = str(manifest)
    assert lines == [
        f"{name}: InferenceClass/broken: spec.devices[0].count: Invalid value: 100: should be "
        "less than or equal to 64",
        f"{name}: InferenceClass/broken: spec.devices[0]: deviceClassName is required when claim "
        "is DRA",
        "1 object valid; 2 problem(s)",
    ]


def test_directories_are_searched_recursively_for_yaml_and_yml(tmp_path: Path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "one.yml").write_text(GOOD_CLASS)
    (tmp_path / "a" / "two.yaml").write_text(GOOD_CLASS.replace("l4", "l4-two"))
    (tmp_path / "a" / "notes.txt").write_text("not: [yaml")
    result = run(str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2 objects valid"


def test_malformed_yaml_names_file_and_line(tmp_path: Path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [oops\n")
    result = run(str(manifest))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{manifest}:4:1: invalid YAML: ")


def test_a_missing_path(tmp_path: Path):
    result = run(str(tmp_path / "nope.yaml"))
    assert result.exit_code == 1
    assert f"{tmp_path / 'nope.yaml'}: no such file or directory" in result.stderr


def test_an_empty_directory_is_valid(tmp_path: Path):
    result = run(str(tmp_path))
    assert result.exit_code == 0
    assert result.stdout.strip() == "0 objects valid"


def test_an_unknown_kind_fails(tmp_path: Path):
    (tmp_path / "x.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n"
    )
    result = run(str(tmp_path))
    assert result.exit_code == 1
    assert "Gadget/g: no schema for apiVersion example.com/v1 kind Gadget" in result.stderr


XRD_WITH_BAD_RULE = """\
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: gadgets.example.modelplane.ai
spec:
  group: example.modelplane.ai
  names: {kind: Gadget, plural: gadgets}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.size >= "
            properties:
              size: {type: integer, maximum: 3}
---
apiVersion: example.modelplane.ai/v1
kind: Gadget
metadata:
  name: g
spec:
  size: 4
"""


@pytest.mark.parametrize("rule_ok", [False, True])
def test_xrds_among_the_inputs_are_checked_and_used(tmp_path: Path, rule_ok: bool):
    text = XRD_WITH_BAD_RULE
    if rule_ok:
        text = text.replace('"self.size >= "', '"self.size >= 0"')
    (tmp_path / "gadget.yaml").write_text(text)
    result = run(str(tmp_path))
    assert result.exit_code == 1
    errors = result.stderr
    assert ("compilation failed" in errors) is not rule_ok
    if rule_ok:  # the Gadget is validated against the XRD found beside it
        assert "Gadget/g: spec.size: Invalid value: 4: should be less than or equal to 3" in errors
    else:  # a refused XRD never establishes: the API server has no Gadget kind
        assert "Gadget/g: no schema for apiVersion example.modelplane.ai/v1 kind Gadget" in errors


def test_duplicate_keys_are_refused_like_kubectl(tmp_path: Path):
    manifest = tmp_path / "dup.yaml"
    manifest.write_text(GOOD_CLASS + "  description: one\n  description: two\n")
    result = run(str(manifest))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f'{manifest}:11:3: invalid YAML: mapping key "description" already defined'
    )


def test_a_list_of_objects_is_validated_item_by_item(tmp_path: Path):
    items = [yaml.safe_load(GOOD_CLASS), yaml.safe_load(BAD_CLASS)]
    (tmp_path / "list.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    )
    result = run(str(tmp_path))
    assert result.exit_code == 1
    assert "InferenceClass/broken: spec.devices[0].count" in result.stderr
    assert result.stderr.strip().endswith("1 object valid; 2 problem(s)")


def test_a_version_attribute_that_is_not_semver_is_refused_naming_the_attribute(tmp_path):
    (tmp_path / "class.yaml").write_text(
        "apiVersion: modelplane.ai/v1alpha1\nkind: InferenceClass\nmetadata: {name: l4}\n"
        "spec:\n  devices:\n  - name: gpu\n    driver: gpu.nvidia.com\n"
        "    deviceClassName: gpu.nvidia.com\n"
        '    attributes: {cudaComputeCapability: {version: "8.9"}}\n'
    )
    result = CliRunner().invoke(cli, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert (
        "InferenceClass/l4: spec.devices[0].attributes[cudaComputeCapability]: version must be"
        " a semantic version MAJOR.MINOR.PATCH (for example 8.9.0)"
    ) in result.output
    (tmp_path / "class.yaml").write_text(
        (tmp_path / "class.yaml").read_text().replace('"8.9"', '"8.9.0"')
    )
    assert CliRunner().invoke(cli, ["validate", str(tmp_path)]).exit_code == 0
