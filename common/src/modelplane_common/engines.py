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
from collections.abc import Iterable, Sequence

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
