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

The comparison itself is in ``renderdiff``; ``validatecheck`` judges ``modelplane validate``
by ``crossplane resource validate`` the same way.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

from modelplane_realplane import build, processes
from modelplane_realplane.paths import OUTPUT, REPOSITORY
from modelplane_realplane.renderdiff import (
    RENDER_HEADING,
    Difference,
    Documented,
    Outcome,
    Verdict,
    compare_outputs,
    documented,
    judge,
)

COMMAND = ("uv", "run", "modelplane", "render")
TARGET_ANNOTATION = "render.crossplane.io/runtime-development-target"
RUNTIME_ANNOTATION = "render.crossplane.io/runtime"
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


def run_modelplane(argv: list[str]) -> Outcome:
    """``modelplane render ARGV`` in this process, through its click command."""
    from click.testing import CliRunner  # noqa: PLC0415
    from modelplane.main import cli  # noqa: PLC0415

    started = time.monotonic()
    result = CliRunner().invoke(cli, ["render", *argv], catch_exceptions=False)
    return Outcome(result.exit_code, result.stdout, result.stderr, time.monotonic() - started)


def quiet_environment(workdir: Path) -> dict[str, str]:
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
        env=quiet_environment(workdir),
    )
    return Outcome(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


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
