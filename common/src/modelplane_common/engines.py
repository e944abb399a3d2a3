"""What Modelplane reads from an engine container's command and args (D2: read, never edit).

An engine is recognised by its launcher: ``vllm serve`` or ``vllm.entrypoints.openai.api_server``
for vLLM, ``sglang.launch_server`` for SGLang, found in the command and args (a ``sh -c`` script
is split into shell words) or, when the image's own entrypoint launches it, in the image name.
The port is the launcher's ``--port`` (only flags of the launcher's own shell command count, so
``ray start --port=6379 && vllm serve ...`` is vLLM on 8000), else the engine's documented
default. Facts: design/engines.md.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from modelplane_common.quantity import Quantity, QuantityError

VLLM = "vLLM"
SGLANG = "SGLang"
UNKNOWN = "unrecognised engine"

# Each engine's listen port when its launcher gets no --port (vLLM's and SGLang's CLI docs).
DEFAULT_PORTS = {VLLM: 8000, SGLANG: 30000}
# Modelplane's serving contract for an engine it does not recognise: the OpenAI API on 8000.
CONTRACT_PORT = 8000
HEALTH_PATH = "/health"

_SHELL_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
_MODULE_LAUNCHERS = {
    "vllm.entrypoints.openai.api_server": VLLM,
    "sglang.launch_server": SGLANG,
}


@dataclasses.dataclass(frozen=True)
class EngineFacts:
    """The engine a container runs and where it listens."""

    engine: str  # VLLM, SGLANG or UNKNOWN
    port: int
    port_source: str  # for messages: "--port=8001 in its args", "vLLM's default", ...

    def describe(self) -> str:
        return f"{self.engine} on port {self.port} ({self.port_source})"


def _shell_words(words: Iterable[str]) -> list[str]:
    """Every word, with shell scripts (words holding spaces) split the way ``sh`` would."""
    out: list[str] = []
    for word in words:
        if any(ch.isspace() for ch in word):
            try:
                out.extend(shlex.split(word, comments=True, posix=True))
            except ValueError:
                out.extend(word.split())
        else:
            out.append(word)
    return out


def _segments(words: list[str]) -> list[list[str]]:
    """The words split into shell commands at ``&&``, ``;``, ``|`` and ``&``."""
    segments: list[list[str]] = [[]]
    for word in words:
        stripped = word.rstrip(";")
        if stripped:
            segments[-1].append(stripped)
        if word in _SHELL_SEPARATORS or word.endswith(";"):
            segments.append([])
    return [s for s in segments if s]


def _launcher(segment: Sequence[str]) -> tuple[str, int] | None:
    """The engine a shell command launches and the index of the first word after the launcher."""
    for index, word in enumerate(segment):
        base = word.rsplit("/", 1)[-1]
        if base == "vllm" and index + 1 < len(segment) and segment[index + 1] == "serve":
            return VLLM, index + 2
        if word in _MODULE_LAUNCHERS:
            return _MODULE_LAUNCHERS[word], index + 1
    return None


def _image_engine(image: str) -> str:
    repository = image.rsplit("@", 1)[0]
    name = repository.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    path = repository.lower()
    if "sglang" in name or "/sglang" in path:
        return SGLANG
    if "vllm" in name or "/vllm" in path:
        return VLLM
    return UNKNOWN


def _port_flag(words: Sequence[str]) -> int | None:
    """The value of ``--port N`` / ``--port=N`` among ``words``; the last one wins, as in argparse.

    Unparsable or out-of-range values are skipped."""
    found: int | None = None
    for index, word in enumerate(words):
        if word == "--port" and index + 1 < len(words):
            value = words[index + 1]
        elif word.startswith("--port="):
            value = word[len("--port=") :]
        else:
            continue
        try:
            port = int(value)
        except ValueError:
            continue
        if 0 < port < 65536:
            found = port
    return found


def engine_facts(
    image: str, command: Sequence[str] | None, args: Sequence[str] | None
) -> EngineFacts:
    """Which engine the container runs and the port it listens on."""
    words = _shell_words([*(command or []), *(args or [])])
    for segment in _segments(words):
        launched = _launcher(segment)
        if launched is None:
            continue
        engine, after = launched
        port = _port_flag(segment[after:])
        if port is not None:
            return EngineFacts(engine, port, f"--port={port} in its command line")
        return EngineFacts(engine, DEFAULT_PORTS[engine], f"{engine}'s default")
    # No launcher in command or args: the image's entrypoint launches the engine with args.
    engine = _image_engine(image)
    port = _port_flag(_shell_words(args or []))
    if port is not None:
        return EngineFacts(engine, port, f"--port={port} in its args")
    if engine == UNKNOWN:
        return EngineFacts(engine, CONTRACT_PORT, "Modelplane's serving contract")
    return EngineFacts(engine, DEFAULT_PORTS[engine], f"{engine}'s default")


# --------------------------------------------------------------------------------------------
# Checks on a ModelDeployment's or ModelReplica's spec.engines (plain JSON), shared by the
# replica function (which refuses), the deployment function and `modelplane validate`.

JSON = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class PhasePorts:
    """Ports of PrefillDecode serving."""

    pool: int  # the InferencePool's target: where prefill listens and the decode sidecar binds
    decode: int  # where the decode engine itself listens, behind its sidecar


def _serving_index(engine: JSON) -> int:
    """The index of the member whose pods serve: the Standalone member or the Leader."""
    members = engine.get("members") or []
    for index, member in enumerate(members):
        if (member.get("role") or "Standalone") in ("Standalone", "Leader"):
            return index
    return 0


def _container(engine: JSON, member: int) -> JSON:
    members = engine.get("members") or [{}]
    containers = ((members[member].get("template") or {}).get("spec") or {}).get("containers")
    return (containers or [{}])[0]


def container_facts(container: JSON) -> EngineFacts:
    return engine_facts(
        str(container.get("image") or ""), container.get("command"), container.get("args")
    )


def _phase(engines: Sequence[JSON], phase: str) -> tuple[int, JSON]:
    return next((i, e) for i, e in enumerate(engines) if e.get("phase") == phase)


def _serving_facts(engine: JSON) -> EngineFacts:
    return container_facts(_container(engine, _serving_index(engine)))


def _container_path(index: int, engine: JSON) -> str:
    return f"spec.engines[{index}].members[{_serving_index(engine)}].template.spec.containers[0]"


def phase_ports(engines: Sequence[JSON]) -> PhasePorts:
    """The ports of a PrefillDecode replica's two phase engines."""
    return PhasePorts(
        pool=_serving_facts(_phase(engines, "Prefill")[1]).port,
        decode=_serving_facts(_phase(engines, "Decode")[1]).port,
    )


def prefill_decode_problems(engines: Sequence[JSON]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of PrefillDecode serving with one Prefill and one Decode engine."""
    problems: list[str] = []
    warnings: list[str] = []
    (prefill_at, prefill), (decode_at, decode) = (
        _phase(engines, "Prefill"),
        _phase(engines, "Decode"),
    )
    for index, engine in ((prefill_at, prefill), (decode_at, decode)):
        facts = _serving_facts(engine)
        name = engine.get("name")
        where = f"{_container_path(index, engine)} ({engine.get('phase')} engine {name!r})"
        if facts.engine == SGLANG:
            problems.append(
                f"{where} runs SGLang, but PrefillDecode serving composes the llm-d routing "
                "sidecar and NIXL settings, which speak vLLM's KV-transfer protocol only; "
                "serve SGLang with serving.mode Unified, or run vLLM in both phase engines"
            )
        elif facts.engine == UNKNOWN:
            warnings.append(
                f"{where} is not recognised as vLLM (no 'vllm serve' in its command line and no "
                "vllm in its image name); PrefillDecode assumes vLLM's KV-transfer protocol and "
                f"that it listens on port {facts.port} ({facts.port_source})"
            )
    ports = phase_ports(engines)
    decode_facts = _serving_facts(decode)
    if ports.decode == ports.pool:
        problems.append(
            f"{_container_path(decode_at, decode)}.args: decode engine {decode.get('name')!r} "
            f"({decode_facts.engine}) listens on port {ports.decode} "
            f"({decode_facts.port_source}), which its routing sidecar must bind: the "
            f"InferencePool sends requests to port {ports.pool}, where prefill engine "
            f"{prefill.get('name')!r} listens, in both engines' pods; move the decode engine "
            f"with --port={ports.pool + 1} in its args"
        )
    return problems, warnings


def _quantity(value: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(value))
    except QuantityError:
        return None


def _resource_problems(resources: JSON, path: str) -> list[str]:
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    problems: list[str] = []
    for name, value in requests.items():
        wanted = _quantity(value)
        bound = _quantity(limits[name]) if name in limits else None
        if "/" in name and (bound is None or wanted != bound):
            problems.append(
                f"{path}.resources.limits[{name!r}]: extended resource {name} cannot be "
                f"overcommitted; set it in limits (to {value}, as requested)"
            )
        elif wanted is not None and bound is not None and wanted.compare(bound) > 0:
            problems.append(
                f"{path}.resources.requests[{name!r}]: request {value} is above its limit "
                f"{limits[name]}"
            )
    return problems


def resource_problems(engines: Sequence[JSON]) -> list[str]:
    """Requests and limits the workload cluster's API server would refuse in a pod."""
    problems: list[str] = []
    for engine_index, engine in enumerate(engines):
        for member_index in range(len(engine.get("members") or [])):
            resources = _container(engine, member_index).get("resources")
            if isinstance(resources, Mapping):
                path = f"spec.engines[{engine_index}].members[{member_index}]"
                problems.extend(
                    _resource_problems(resources, f"{path}.template.spec.containers[0]")
                )
    return problems


def engine_problems(spec: JSON) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a ModelDeployment's or ModelReplica's engines whose shape the
    XRD admitted: what would never run on the workload cluster."""
    engines = [e for e in spec.get("engines") or [] if isinstance(e, Mapping)]
    problems = resource_problems(engines)
    warnings: list[str] = []
    mode = (spec.get("serving") or {}).get("mode")
    phases = sorted(str(e.get("phase")) for e in engines if e.get("phase"))
    if mode == "PrefillDecode" and phases == ["Decode", "Prefill"] and len(engines) == 2:
        pd_problems, warnings = prefill_decode_problems(engines)
        problems.extend(pd_problems)
    return problems, warnings
