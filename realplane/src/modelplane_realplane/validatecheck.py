"""``modelplane validate`` judged by the real ``crossplane resource validate``.

Every object of ``examples/`` gets both verdicts; a disagreement must be listed in
design/render.md under ``VALIDATE_HEADING`` (the same exact-list rule as render's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
from pathlib import Path

import yaml

from modelplane_realplane import crds
from modelplane_realplane.paths import OUTPUT, REPOSITORY
from modelplane_realplane.rendercheck import quiet_environment
from modelplane_realplane.renderdiff import (
    JSON,
    RESOURCE_NAME_ANNOTATION,
    Difference,
    Documented,
    Verdict,
    judge,
    parse_stream,
)

# --------------------------------------------------------------------------------------------
# validate: crossplane resource validate against modelplane validate


@dataclasses.dataclass(frozen=True)
class ObjectVerdict:
    """Both verdicts on one object of the examples."""

    file: str  # relative to the repository
    api_version: str
    kind: str
    namespace: str
    name: str
    modelplane: str  # valid | invalid
    crossplane: str  # valid | invalid | missingSchema | defaultingFailed
    modelplane_problems: tuple[str, ...]
    crossplane_errors: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.namespace + '/' if self.namespace else ''}{self.name}"

    @property
    def judged(self) -> bool:
        """Whether crossplane had a schema for the object (otherwise it has no verdict)."""
        return self.crossplane != "missingSchema"

    @property
    def agree(self) -> bool:
        theirs = "valid" if self.crossplane == "defaultingFailed" else self.crossplane
        return not self.judged or theirs == self.modelplane


def shipped_crds(dest: Path) -> Path:
    """The CRDs Modelplane ships for the kinds it composes or reads, written as manifests for
    the real validate to load as extensions (XRD-defined kinds are left to apis/)."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.yaml"):
        old.unlink()
    for crd in crds.shipped_crds():
        (dest / f"{crd['metadata']['name']}.yaml").write_text(yaml.safe_dump(crd))
    return dest


def _manifest_files(directory: Path) -> list[Path]:
    """The *.yaml/*.yml files below ``directory`` in the order Go's filepath.Walk visits them."""
    files = [p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(directory).parts)


def _identity(doc: JSON) -> tuple[str, str, str, str]:
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = metadata.get("name") or (metadata.get("annotations") or {}).get(
        RESOURCE_NAME_ANNOTATION, ""
    )
    return (
        str(doc.get("apiVersion", "")),
        str(doc.get("kind", "")),
        str(metadata.get("namespace") or ""),
        str(name),
    )


def run_crossplane_validate(
    crossplane: Path, extensions: list[Path], resources: Path, workdir: Path
) -> JSON:
    """``crossplane resource validate`` with no Crossplane image (nothing is downloaded: the
    extensions hold no packages) and a cache under _output; its JSON result."""
    cache = OUTPUT / "validate-cache"
    done = subprocess.run(
        [
            str(crossplane),
            "resource",
            "validate",
            ",".join(str(e) for e in extensions),
            str(resources),
            "--crossplane-image=",
            f"--cache-dir={cache}",
            "--output=json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=workdir,
        env=quiet_environment(workdir),
    )
    start = done.stdout.find("{")
    if start < 0:
        raise RuntimeError(
            f"crossplane resource validate printed no result (exit {done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )
    return json.loads(done.stdout[start:])


def run_modelplane_validate(paths: list[Path], root: Path) -> JSON:
    """``modelplane validate -o json PATHS`` in this process, from the repository root."""
    from click.testing import CliRunner  # noqa: PLC0415
    from modelplane.main import cli  # noqa: PLC0415

    with contextlib.chdir(root):
        result = CliRunner().invoke(
            cli, ["validate", "-o", "json", *(str(p) for p in paths)], catch_exceptions=False
        )
    return json.loads(result.stdout)


def validate_verdicts(
    crossplane: Path, workdir: Path, root: Path = REPOSITORY
) -> list[ObjectVerdict]:
    """Both verdicts on every object of ``examples/``: modelplane's (from
    ``modelplane validate -o json examples``) and crossplane's (``crossplane resource validate``
    against apis/ plus the CRDs Modelplane ships)."""
    examples = root / "examples"
    crds = shipped_crds(workdir / "crds")
    theirs = run_crossplane_validate(crossplane, [root / "apis", crds], examples, workdir)
    ours = run_modelplane_validate([Path("examples")], root)
    by_identity: dict[tuple[str, str, str, str], list[JSON]] = {}
    for result in theirs.get("resources") or []:
        key = (
            result.get("apiVersion", ""),
            result.get("kind", ""),
            result.get("namespace", ""),
            result.get("name", ""),
        )
        by_identity.setdefault(key, []).append(result)
    problems: dict[tuple[str, str, str], list[str]] = {}
    for problem in ours.get("problems") or []:
        key = (problem.get("file", ""), problem.get("kind", ""), problem.get("name", ""))
        text = (
            f"{problem.get('path')}: {problem.get('message')}"
            if problem.get("path")
            else (str(problem.get("message")))
        )
        problems.setdefault(key, []).append(text)
    verdicts = []
    for file in _manifest_files(examples):
        relative = str(file.relative_to(root))
        for doc in parse_stream(file.read_text()):
            if not isinstance(doc, dict):
                continue
            identity = _identity(doc)
            matches = by_identity.get(identity) or []
            result = matches.pop(0) if matches else {"status": "notReported"}
            metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            shown = metadata.get("name") or metadata.get("generateName") or "?"
            mine = problems.get((relative, identity[1], str(shown)), [])
            verdicts.append(
                ObjectVerdict(
                    relative,
                    identity[0],
                    identity[1],
                    identity[2],
                    identity[3],
                    "invalid" if mine else "valid",
                    str(result.get("status")),
                    tuple(mine),
                    tuple(str(e.get("message")) for e in result.get("errors") or []),
                )
            )
    return verdicts


def validate_figures(verdicts: list[ObjectVerdict], rows: list[Documented]) -> dict[str, int]:
    """The validate judge's figures: objects, how many crossplane judged, agreements."""
    judged = [v for v in verdicts if v.judged]
    return {
        "objects": len(verdicts),
        "judged": len(judged),
        "agree": sum(1 for v in judged if v.agree),
        "documented_differences": len(rows),
    }


def judge_validate(verdicts: list[ObjectVerdict], rows: list[Documented]) -> Verdict:
    """Disagreements as differences (input: the file, path: Kind/[namespace/]name), checked
    against the documented rows like render's."""
    found: dict[str, list[Difference]] = {}
    for verdict in verdicts:
        if not verdict.agree:
            found.setdefault(verdict.file, []).append(
                Difference(
                    verdict.label,
                    {"verdict": verdict.modelplane, "problems": list(verdict.modelplane_problems)},
                    {"verdict": verdict.crossplane, "errors": list(verdict.crossplane_errors)},
                )
            )
    return judge(found, rows)
