"""``modelplane render`` and ``modelplane validate`` judged by the real Crossplane CLI.

Every render input is a ``uv run modelplane render ...`` command documented in the examples'
READMEs. Each one is rendered twice, with the same explicit Composition and the same Functions
file: by ``modelplane render`` (in-process, through its click command) and by the real
``crossplane render`` running the built ``crossplane-core`` as its render engine. Both dial the
same twelve function processes, started once (``FunctionFleet``). The two YAML streams are
parsed and compared as objects; what differs is a ``Difference`` with a path such as
``composed/deployment:metadata.name``.

A difference is acceptable only when ``design/render.md`` lists it, in the table under
``RENDER_HEADING`` (decision D7). The list must stay exact: an unlisted difference and a listed
one that no longer occurs are both failures (``Verdict``).

``crossplane resource validate`` judges ``modelplane validate`` the same way: every object of
``examples/`` gets both verdicts, and a disagreement must be listed under ``VALIDATE_HEADING``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import build, crds, processes
from modelplane_realplane.paths import OUTPUT, REPOSITORY

JSON = dict[str, Any]

DESIGN = REPOSITORY / "design" / "render.md"
TEST = "tests/realplane/test_render_matches_crossplane.py"
RENDER_HEADING = f"## Known differences from crossplane render (checked by {TEST})"
VALIDATE_HEADING = f"## Known differences from crossplane resource validate (checked by {TEST})"

COMMAND = ("uv", "run", "modelplane", "render")
TARGET_ANNOTATION = "render.crossplane.io/runtime-development-target"
RUNTIME_ANNOTATION = "render.crossplane.io/runtime"
RESOURCE_NAME_ANNOTATION = "crossplane.io/composition-resource-name"
RENDER_API_VERSION = "render.crossplane.io/v1beta1"
# Shell syntax that makes a documented line more than one plain command.
_SHELL_OPERATORS = set(";&|<>()")


# --------------------------------------------------------------------------------------------
# Render inputs: the commands the examples document


@dataclasses.dataclass(frozen=True)
class RenderInput:
    """One documented ``modelplane render`` command: where it is, and its arguments."""

    readme: str  # relative to the repository, e.g. examples/cache/README.md
    line: int  # 1-based line the command starts on
    args: tuple[str, ...]  # what follows ``modelplane render``

    @property
    def label(self) -> str:
        """How the input is named in design/render.md: its arguments, as typed."""
        return shlex.join(self.args)


def _logical_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(first line number, line with ``\\`` continuations joined, inside a code fence)."""
    fenced = False
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending and raw.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        yield start, " ".join(part.strip() for part in pending), fenced
        pending = []
    if pending:
        yield start, " ".join(part.strip() for part in pending), fenced


def command_arguments(line: str) -> tuple[str, ...] | None:
    """The arguments of a ``uv run modelplane render`` command line, or None when the line is
    not one (or is more than one plain command: redirections, pipes, lists, subshells)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not a command we can run
        return None
    if tokens[:1] == ["$"]:
        tokens = tokens[1:]
    if tuple(tokens[: len(COMMAND)]) != COMMAND:
        return None
    if any(token and set(token) <= _SHELL_OPERATORS for token in tokens):
        return None
    return tuple(tokens[len(COMMAND) :])


def render_inputs(root: Path = REPOSITORY) -> list[RenderInput]:
    """Every render input: each distinct ``uv run modelplane render`` command in a code block
    of ``examples/README.md`` or ``examples/*/README.md``, in file and line order."""
    examples = root / "examples"
    readmes = [examples / "README.md", *sorted(examples.glob("*/README.md"))]
    found: list[RenderInput] = []
    seen: set[tuple[str, ...]] = set()
    for readme in readmes:
        if not readme.is_file():
            continue
        for number, line, fenced in _logical_lines(readme.read_text()):
            args = command_arguments(line) if fenced else None
            if args is None or args in seen:
                continue
            seen.add(args)
            found.append(RenderInput(str(readme.relative_to(root)), number, args))
    return found


# --------------------------------------------------------------------------------------------
# The command line both tools get


@dataclasses.dataclass(frozen=True)
class Invocation:
    """``XR COMPOSITION FUNCTIONS [flags]``, all paths absolute."""

    xr: Path
    composition: Path
    functions: Path
    flags: tuple[str, ...]

    def argv(self) -> list[str]:
        return [str(self.xr), str(self.composition), str(self.functions), *self.flags]


def _absolute(root: Path, location: str) -> str:
    path = Path(location)
    return str(path if path.is_absolute() else root / path)


# modelplane render's options whose value is a path (made absolute for both tools).
_PATH_OPTIONS = {
    "observed_resources",
    "required_resources",
    "extra_resources",
    "required_schemas",
    "xrd_file",
    "function_credentials",
}


def invocation(item: RenderInput, functions: Path, root: Path = REPOSITORY) -> Invocation:
    """The explicit command line for ``item``: the Composition ``modelplane render`` would pick
    for the XR (the real CLI needs it spelt out), ``functions`` as FUNCTIONS, and the same
    flags, under their long names (the two CLIs share them)."""
    import click  # noqa: PLC0415 - only needed here
    from modelplane import render, xrd  # noqa: PLC0415 - the CLI under test

    context = render.command.make_context("render", list(item.args), resilient_parsing=True)
    params = context.params
    if params.get("functions_argument") or params.get("functions"):
        raise ValueError(
            f"{item.label}: names its own Functions file; both tools must dial "
            "the same started functions, so inputs use the repository's"
        )
    xr_path = Path(_absolute(root, params["composite_resource"]))
    if params.get("composition"):
        composition = Path(_absolute(root, params["composition"]))
    else:
        xr = render.load_one(str(xr_path), "composite resource")
        found = xrd.read_catalog(root / "apis").composition_for(xr["apiVersion"], xr["kind"])
        if found is None:
            raise ValueError(f"{item.label}: no Composition in apis/ for {xr['kind']}")
        composition = Path(found[0])
    flags: list[str] = []
    for param in render.command.params:
        if not isinstance(param, click.Option) or param.name in ("functions", None):
            continue
        value = params.get(param.name)
        if value is None or value == () or value is False or value == param.default:
            continue
        flag = max(param.opts, key=len)
        values = value if isinstance(value, tuple) else (value,)
        for one in values:
            if one is True:
                flags.append(flag)
            elif param.name in _PATH_OPTIONS:
                flags.append(f"{flag}={_absolute(root, one)}")
            elif param.name == "context_files":
                key, _, path = str(one).partition("=")
                flags.append(f"{flag}={key}={_absolute(root, path)}")
            else:
                flags.append(f"{flag}={one}")
    return Invocation(xr_path, composition, functions, tuple(flags))


# --------------------------------------------------------------------------------------------
# The functions, started once


def _function_names(functions_file: Path) -> list[str]:
    return [
        doc["metadata"]["name"]
        for doc in yaml.safe_load_all(functions_file.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "Function"
    ]


def _script(directory: str, root: Path) -> list[str]:
    """How to run a repository function: its console script beside this interpreter (the
    workspace's virtual environment), else through ``python3 -m uv run``."""
    script = Path(sys.executable).parent / directory
    if script.is_file():
        return [str(script)]
    return ["python3", "-m", "uv", "run", "--directory", str(root), directory]


def _distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = processes.free_port()
        if port not in ports:
            ports.append(port)
    return ports


def rewrite_functions(source: Path, targets: dict[str, str], dest: Path) -> Path:
    """A copy of the Functions file ``source`` whose Development targets are ``targets``
    (Function name to ``host:port``); Functions not named there are copied as they are."""
    documents = [doc for doc in yaml.safe_load_all(source.read_text()) if doc is not None]
    for doc in documents:
        name = (doc.get("metadata") or {}).get("name")
        if doc.get("kind") == "Function" and name in targets:
            annotations = doc["metadata"].setdefault("annotations", {})
            annotations[RUNTIME_ANNOTATION] = "Development"
            annotations[TARGET_ANNOTATION] = targets[name]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return dest


class FunctionFleet:
    """Every function of ``functions.yaml``, each its own process on a free loopback port (the
    file's own ports may be taken, 9443 by provider-kubernetes' webhook), and a copy of the
    file pointing at them. Use as a context manager; leaving it stops every process."""

    def __init__(self, workdir: Path, root: Path = REPOSITORY) -> None:
        from modelplane.project import function_directory  # noqa: PLC0415

        self.root = root
        self.workdir = workdir
        self.logs = workdir / "logs"
        names = _function_names(root / "functions.yaml")
        self.ports = dict(zip(names, _distinct_free_ports(len(names)), strict=True))
        self.directories = {name: function_directory(name) for name in names}
        self.pids: dict[str, int] = {}
        self.functions = workdir / "functions.yaml"

    def __enter__(self) -> FunctionFleet:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def targets(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{port}" for name, port in self.ports.items()}

    def start(self, timeout: float = 120) -> None:
        for name, port in self.ports.items():
            directory = self.directories[name]
            command = [
                *_script(directory, self.root),
                "--insecure",
                "--address",
                f"127.0.0.1:{port}",
            ]
            self.pids[name] = processes.start(directory, command, self.logs, cwd=self.root)
        for name, port in self.ports.items():
            directory = self.directories[name]
            processes.wait_ready(
                directory,
                self.pids[name],
                self.logs / f"{directory}.log",
                lambda port=port: processes.port_open(port),
                timeout,
            )
        rewrite_functions(self.root / "functions.yaml", self.targets(), self.functions)

    def stop(self) -> None:
        for pid in self.pids.values():
            processes.stop(pid)
        self.pids.clear()


# --------------------------------------------------------------------------------------------
# Running both tools


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float


def run_modelplane(argv: list[str]) -> Outcome:
    """``modelplane render ARGV`` in this process, through its click command."""
    from click.testing import CliRunner  # noqa: PLC0415
    from modelplane.main import cli  # noqa: PLC0415

    started = time.monotonic()
    result = CliRunner().invoke(cli, ["render", *argv], catch_exceptions=False)
    return Outcome(result.exit_code, result.stdout, result.stderr, time.monotonic() - started)


def _quiet_environment(workdir: Path) -> dict[str, str]:
    """The real CLI reads its configuration from $CROSSPLANE_CONFIG; point it at a file that
    does not exist so a developer's own configuration cannot change the verdict."""
    workdir.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "CROSSPLANE_CONFIG": str(workdir / "crossplane-config.yaml")}


def run_crossplane(
    argv: list[str], crossplane: Path, core: Path, workdir: Path, timeout: float = 180
) -> Outcome:
    """The real ``crossplane render ARGV`` with the built core binary as its render engine
    (``crossplane internal render``; no Docker)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(crossplane), "render", *argv, f"--crossplane-binary={core}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=workdir,
        env=_quiet_environment(workdir),
    )
    return Outcome(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


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


# --------------------------------------------------------------------------------------------
# The whole render comparison


@dataclasses.dataclass(frozen=True)
class Comparison:
    input: RenderInput
    invocation: Invocation
    modelplane: Outcome
    crossplane: Outcome
    differences: list[Difference]


def compare_inputs(
    inputs: Iterable[RenderInput], fleet: FunctionFleet, crossplane: Path, core: Path
) -> list[Comparison]:
    """Render every input with both tools against ``fleet`` and compare the outputs."""
    comparisons = []
    for item in inputs:
        call = invocation(item, fleet.functions, fleet.root)
        ours = run_modelplane(call.argv())
        theirs = run_crossplane(call.argv(), crossplane, core, fleet.workdir)
        comparisons.append(Comparison(item, call, ours, theirs, compare_outputs(ours, theirs)))
    return comparisons


def figures(comparisons: list[Comparison], rows: list[Documented]) -> dict[str, int]:
    """The render judge's figures for report.json."""
    return {
        "identical": sum(1 for c in comparisons if not c.differences),
        "inputs": len(comparisons),
        "documented_differences": len(rows),
    }


def check_render(
    crossplane: Path, core: Path, workdir: Path, root: Path = REPOSITORY
) -> tuple[dict[str, int], Verdict, list[Comparison]]:
    """Start the functions, compare every render input, judge the differences: (figures,
    verdict, comparisons). The functions are stopped before this returns."""
    rows = documented(RENDER_HEADING, root / "design" / "render.md")
    with FunctionFleet(workdir, root) as fleet:
        comparisons = compare_inputs(render_inputs(root), fleet, crossplane, core)
    found = {c.input.label: c.differences for c in comparisons}
    return figures(comparisons, rows), judge(found, rows), comparisons


def render_figures(workdir: Path = OUTPUT / "rendercheck") -> dict[str, int]:
    """The render judge's figures, ``{"identical", "inputs", "documented_differences"}``, from
    a whole run with the built ``crossplane`` and ``crossplane-core`` (BuildError when one is
    missing)."""
    found, _, _ = check_render(build.binary("crossplane"), build.binary("crossplane-core"), workdir)
    return found


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
        env=_quiet_environment(workdir),
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
