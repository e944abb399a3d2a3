"""`modelplane validate PATH...`: what `kubectl apply --dry-run=server` would say, offline."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import yaml
from modelplane_common.managed import without_status

from modelplane import engine_warnings, references, validation, xrd
from modelplane.validation import Problem, relative, validate_object

SUFFIXES = (".yaml", ".yml")


@dataclasses.dataclass(frozen=True)
class Document:
    file: str
    line: int  # 1-based line where the document starts
    body: Any


def manifest_files(paths: list[Path]) -> Iterator[Path]:
    """The files named, and every *.yaml/*.yml below the directories named, sorted."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
        else:
            yield path


class _StrictLoader(yaml.SafeLoader):
    """Refuses duplicate keys, as kubectl's strict YAML decoding does."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue  # unhashable keys fail in the base class with their own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'mapping key "{key}" already defined', key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expand_lists(body: Any) -> list[Any]:
    """A `kind: List` (what `kubectl get -o yaml` prints) holds its objects in items."""
    if (
        isinstance(body, dict)
        and body.get("apiVersion") == "v1"
        and body.get("kind") == "List"
        and isinstance(body.get("items"), list)
    ):
        return list(body["items"])
    return [body]


def read_documents(path: Path) -> tuple[list[Document], list[str]]:
    """Every non-empty document of a (multi-document) YAML file, and parse errors."""
    name = relative(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        return [], [f"{name}: cannot read: {err}"]
    documents: list[Document] = []
    loader = _StrictLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            body = loader.construct_document(node)
            if body is not None:
                line = node.start_mark.line + 1
                documents.extend(Document(name, line, item) for item in _expand_lists(body))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(err, "problem", None) or str(err)
        return documents, [f"{where}: invalid YAML: {problem}"]
    finally:
        loader.dispose()
    return documents, []


def catalog_with(documents: list[Document]) -> xrd.Catalog:
    """The repository's XRDs and Compositions, plus (overriding) those among the inputs. An
    XRD or CRD the API server would refuse does not take effect: its kind stays as it was
    (the repository's definition, or none), and the definition's own problems are reported."""
    try:
        base = xrd.catalog()
    except FileNotFoundError:
        base = xrd.Catalog({}, {})
    admitted = (
        (Path(doc.file), doc.body)
        for doc in documents
        if not xrd.is_definition(doc.body) or not _refused(doc.body)
    )
    return base.with_documents(admitted)


def _refused(definition: dict[str, Any]) -> bool:
    """Whether the API server would refuse this XRD or CRD (_validate reports why, and names
    the object should the check itself fail)."""
    try:
        return bool(validation.check_definition(without_status(definition)))
    except Exception:  # counted as refused; _validate reports it
        return True


@dataclasses.dataclass(frozen=True)
class Report:
    valid: int  # objects the API server would accept
    problems: list[Problem | str]  # a Problem, or a line for unreadable input
    # references naming nothing in the set (references.py), engines that would never run
    # (engine_warnings.py)
    warnings: list[Problem]


def check_paths(paths: list[Path]) -> tuple[int, list[Problem | str]]:
    """(number of valid objects, every problem: a Problem, or a line for unreadable input)."""
    report = check(paths)
    return report.valid, report.problems


def check(paths: list[Path]) -> Report:
    """Every problem of the files and directories named, and every reference among their
    objects that names nothing in them (a warning: it may be on the control plane)."""
    documents: list[Document] = []
    errors: list[Problem | str] = []
    for path in paths:
        if not path.exists():
            errors.append(f"{path}: no such file or directory")
    for file in manifest_files([p for p in paths if p.exists()]):
        found, parse_errors = read_documents(file)
        documents.extend(found)
        errors.extend(parse_errors)
    catalog = catalog_with(documents)
    valid = 0
    for doc in documents:
        problems = _validate(doc, catalog)
        errors.extend(problems)
        valid += not problems
    return Report(valid, errors, _dangling(documents, catalog))


def _dangling(documents: list[Document], catalog: xrd.Catalog) -> list[Problem]:
    try:
        found = references.dangling(documents, catalog)
    except Exception as err:  # a bug here must never hide the problems, nor fail the run
        found = [Problem("", "", "", "", f"references not checked: internal error: {err!r}")]
    try:
        return found + engine_warnings.engine_warnings(documents)
    except Exception as err:  # as above
        return [*found, Problem("", "", "", "", f"engines not checked: internal error: {err!r}")]


def check_documents(documents: list[Document]) -> list[list[Problem]]:
    """The problems of each document, as the API server would admit the set: XRDs, CRDs and
    Compositions among them apply to the rest. For callers holding manifests in memory
    (simulate): ``check_documents([Document(source, line, body), ...])``."""
    catalog = catalog_with(documents)
    return [_validate(doc, catalog) for doc in documents]


def _as_json(problem: Problem | str) -> dict[str, str]:
    if isinstance(problem, str):
        return {"message": problem}
    return dataclasses.asdict(problem)


def _validate(doc: Document, catalog: xrd.Catalog) -> list[Problem]:
    try:
        return validate_object(doc.body, doc.file, catalog)
    except RecursionError:
        message = "nested too deeply to validate here (several hundred levels); not checked"
    except Exception as err:  # a bug here must still name the object, never a traceback
        message = f"internal error: {err!r}"
    kind = doc.body.get("kind", "?") if isinstance(doc.body, dict) else "?"
    return [Problem(doc.file, str(kind), f"(line {doc.line})", "", message)]


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help="text: one problem a line on stderr; json: one document on stdout (for CI).",
)
def command(paths: tuple[Path, ...], output: str) -> None:
    """Validate manifests as the API server would: XRs against their XRD (schema, defaults,
    CEL rules), other kinds against their CRD or core schema, XRDs, CRDs and Compositions
    themselves.

    PATH is a YAML file or a directory (searched recursively for *.yaml and *.yml).
    """
    report = check(list(paths))
    problems, warnings = report.problems, report.warnings
    if output == "json":
        result = {
            "valid": report.valid,
            "problemCount": len(problems),
            "problems": [_as_json(p) for p in problems],
            "warningCount": len(warnings),
            "warnings": [_as_json(w) for w in warnings],
        }
        click.echo(json.dumps(result, indent=2))
        sys.exit(1 if problems else 0)
    for problem in problems:
        click.echo(str(problem), err=True)
    for warning in warnings:
        click.echo(_warning_line(warning), err=True)
    noun = "object" if report.valid == 1 else "objects"
    summary = f"{report.valid} {noun} valid"
    if problems:
        summary += f"; {len(problems)} problem(s)"
    if warnings:
        summary += f"; {len(warnings)} warning(s)"
    if problems:
        click.echo(summary, err=True)
        sys.exit(1)
    click.echo(summary)


def _warning_line(warning: Problem) -> str:
    if not warning.file:  # the check itself failed
        return f"warning: {warning.message}"
    return f"warning: {warning}"
