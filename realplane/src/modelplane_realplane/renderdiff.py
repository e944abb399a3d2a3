"""Two YAML streams compared as objects, and the differences design/render.md accepts.

``compare_outputs`` turns two render outputs into ``Difference``s with paths such as
``composed/deployment:metadata.name``. A difference is acceptable only when a table in
``design/render.md`` lists it (decision D7), and the list must stay exact: an unlisted
difference and a listed one that no longer occurs both fail the ``Verdict``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane.paths import REPOSITORY

JSON = dict[str, Any]

DESIGN = REPOSITORY / "design" / "render.md"
TEST = "tests/realplane/test_render_matches_crossplane.py"
RENDER_HEADING = f"## Known differences from crossplane render (checked by {TEST})"
VALIDATE_HEADING = f"## Known differences from crossplane resource validate (checked by {TEST})"

RESOURCE_NAME_ANNOTATION = "crossplane.io/composition-resource-name"
RENDER_API_VERSION = "render.crossplane.io/v1beta1"


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float


# --------------------------------------------------------------------------------------------
# Comparing two output streams


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_stream(text: str) -> list[Any]:
    return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]


class _Missing:
    """The side of a difference where the field or document is absent."""

    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


@dataclasses.dataclass(frozen=True)
class Difference:
    path: str  # <document>:<field path>, e.g. xr:status.conditions[type=Ready].message
    modelplane: Any
    crossplane: Any

    def __str__(self) -> str:
        return (
            f"{self.path}: modelplane {_show(self.modelplane)}, crossplane {_show(self.crossplane)}"
        )


def _show(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _key(path: str, key: Any) -> str:
    text = str(key)
    if _IDENTIFIER.fullmatch(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{json.dumps(text)}]"


def _normal(value: Any) -> Any:
    """Whole-number floats as integers (Go prints 2.0 as 2; so does modelplane)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _list_key(left: list[Any], right: list[Any]) -> str | None:
    """``type`` when both lists are of objects each with a distinct type (conditions), so a
    list in another order is not reported element by element."""
    for items in (left, right):
        types = [item.get("type") if isinstance(item, dict) else None for item in items]
        if any(not isinstance(t, str) for t in types) or len(set(types)) != len(types):
            return None
    return "type"


def diff_values(path: str, left: Any, right: Any, out: list[Difference]) -> None:
    """Append to ``out`` every place ``left`` (modelplane) and ``right`` (crossplane) differ."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            diff_values(_key(path, key), left.get(key, MISSING), right.get(key, MISSING), out)
        return
    if isinstance(left, list) and isinstance(right, list):
        if (field := _list_key(left, right)) is not None:
            lefts = {item[field]: item for item in left}
            rights = {item[field]: item for item in right}
            for value in sorted(set(lefts) | set(rights)):
                where = f"{path}[{field}={value}]"
                diff_values(where, lefts.get(value, MISSING), rights.get(value, MISSING), out)
            return
        for i in range(max(len(left), len(right))):
            diff_values(
                f"{path}[{i}]",
                left[i] if i < len(left) else MISSING,
                right[i] if i < len(right) else MISSING,
                out,
            )
        return
    if left is MISSING and right is MISSING:
        return
    if left is MISSING or right is MISSING or _normal(left) != _normal(right):
        out.append(Difference(path, left, right))


def _per_resource_event(doc: Any) -> bool:
    """A Result the reconciler emits once per composed resource while walking a Go map: a
    NamespaceOverridden warning, or ``Composed resource "<name>" is not yet ready/valid``."""
    if not isinstance(doc, dict):
        return False
    message = doc.get("message")
    if doc.get("reason") == "NamespaceOverridden":
        return True
    return (
        doc.get("reason") == "ComposeResources"
        and isinstance(message, str)
        and message.startswith('Composed resource "')
    )


def canonical_results(results: list[Any]) -> list[Any]:
    """``results`` with each run of per-resource events sorted by message. The real reconciler
    emits those in Go map iteration order, which is random; every other event keeps its
    place and is compared in order."""
    out: list[Any] = []
    run: list[Any] = []
    for doc in [*results, None]:
        if doc is not None and _per_resource_event(doc):
            run.append(doc)
            continue
        out += sorted(run, key=lambda d: (str(d.get("reason")), str(d.get("message"))))
        run = []
        if doc is not None:
            out.append(doc)
    return out


def _documents(stream: list[Any]) -> dict[str, Any]:
    """The documents of a render output by name: ``xr``, ``composed/<resource name>``,
    ``results`` (a list, per-resource events in a canonical order) and ``context``."""
    named: dict[str, Any] = {}
    results: list[Any] = []
    for index, doc in enumerate(stream):
        if not isinstance(doc, dict):
            named[f"document[{index}]"] = doc
        elif index == 0:
            named["xr"] = doc
        elif doc.get("apiVersion") == RENDER_API_VERSION and doc.get("kind") == "Result":
            results.append(doc)
        elif doc.get("apiVersion") == RENDER_API_VERSION and doc.get("kind") == "Context":
            named["context"] = doc
        else:
            metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            name = (metadata.get("annotations") or {}).get(RESOURCE_NAME_ANNOTATION, "")
            named[f"composed/{name}"] = doc
    if results:
        named["results"] = canonical_results(results)
    return named


def compare_outputs(modelplane: Outcome, crossplane: Outcome) -> list[Difference]:
    """Where the two outputs differ. Both refusing the input is agreement (each says so in
    its own words); only one refusing is one difference at ``exit``."""
    if modelplane.code != 0 or crossplane.code != 0:
        if (modelplane.code != 0) == (crossplane.code != 0):
            return []
        return [
            Difference(
                "exit",
                {"code": modelplane.code, "stderr": modelplane.stderr.strip()},
                {"code": crossplane.code, "stderr": crossplane.stderr.strip()},
            )
        ]
    left = _documents(parse_stream(modelplane.stdout))
    right = _documents(parse_stream(crossplane.stdout))
    out: list[Difference] = []
    for name in sorted(set(left) | set(right)):
        if name not in left or name not in right:
            out.append(Difference(name, left.get(name, MISSING), right.get(name, MISSING)))
            continue
        before = len(out)
        diff_values("", left[name], right[name], out)
        out[before:] = [
            dataclasses.replace(d, path=f"{name}:{d.path}" if d.path else name)
            for d in out[before:]
        ]
    return out


# --------------------------------------------------------------------------------------------
# The documented differences


@dataclasses.dataclass(frozen=True)
class Documented:
    """A row of a known-differences table: ``input`` is an input's label (``*``: any input),
    ``path`` a pattern in which ``*`` stands for any run of characters."""

    input: str
    path: str
    reason: str

    def matches(self, label: str, path: str) -> bool:
        if self.input not in ("*", label):
            return False
        pattern = ".*".join(re.escape(part) for part in self.path.split("*"))
        return re.fullmatch(pattern, path) is not None


def _cell(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text.startswith("`") and text.endswith("`"):
        return text[1:-1]
    return text


def _split_row(line: str) -> list[str]:
    """A Markdown table row's cells; ``|`` inside backticks or escaped stays in its cell."""
    cells: list[str] = []
    current: list[str] = []
    quoted = False
    body = line.strip().removeprefix("|").removesuffix("|")
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body) and body[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if char == "`":
            quoted = not quoted
        if char == "|" and not quoted:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    cells.append("".join(current))
    return cells


def documented(heading: str, design: Path = DESIGN) -> list[Documented]:
    """The rows of the table under ``heading`` in design/render.md (columns Input, Path,
    Reason); an empty list when the section has no table, a ValueError when it is missing."""
    lines = design.read_text().splitlines()
    try:
        start = lines.index(heading) + 1
    except ValueError as err:
        raise ValueError(f"{design} has no section {heading!r}") from err
    rows: list[Documented] = []
    header_seen = False
    for line in lines[start:]:
        if line.startswith("## "):
            break
        if not line.lstrip().startswith("|"):
            if header_seen:
                break
            continue
        cells = [_cell(c) for c in _split_row(line)]
        if not header_seen:
            header_seen = True
            if [c.lower() for c in cells[:3]] != ["input", "path", "reason"]:
                raise ValueError(f"{heading}: the table's columns must be Input | Path | Reason")
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the separator row
        if len(cells) != 3 or not all(cells):
            raise ValueError(f"{heading}: malformed row {line!r}")
        rows.append(Documented(*cells))
    return rows


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the documented list says about a set of differences."""

    undocumented: list[tuple[str, Difference]]  # (input label, difference) no row explains
    stale: list[Documented]  # rows that explain nothing any more

    @property
    def exact(self) -> bool:
        return not self.undocumented and not self.stale


def judge(found: dict[str, list[Difference]], rows: list[Documented]) -> Verdict:
    """Check the differences found per input label against the documented rows."""
    used: set[Documented] = set()
    undocumented: list[tuple[str, Difference]] = []
    for label, differences in found.items():
        for difference in differences:
            matching = [row for row in rows if row.matches(label, difference.path)]
            if not matching:
                undocumented.append((label, difference))
            used.update(matching)
    return Verdict(undocumented, [row for row in rows if row not in used])
