"""The fleet-reading functions as deployed, at fleet scale: request size, fetches, call time.

Each function is started with its console script and default flags, as Crossplane runs it
(``compose-x --insecure --address 127.0.0.1:PORT``: gRPC's 4 MiB receive limit), and called
over real gRPC by a client with gRPC's default limits: the timed calls come from a Go caller
(bench/caller, grpc-go as in Crossplane) where Go is installed, otherwise from this Python
process (``--caller``; each row's ``caller`` says which, bench/callers.py). Its requirements
are resolved the way Crossplane's FetchingFunctionRunner resolves them
(``modelplane.pipeline``): call with none, fetch what the response asks for from the fleet (a
Get by name, a List by labels and namespace), call again, until the requirements are stable.
The fleet is bench/fleet.py's.

Per function and size it measures two reconciles: the first (nothing composed yet) and the
steady one (reconciled again, each time with what it composed observed as its controller
reports it, managedFields included, until it composes the same resources again). For each it
prints the final request's size, how many objects Crossplane fetched for it, the call time
(fastest and median; the request is encoded beforehand and the response left as bytes, as
Crossplane encodes and decodes them in Go on its side of the call), the time this process
takes merely to decode the same request
(``RunFunctionRequest.FromString`` on its bytes plus the plain dicts every function's shared
``Request`` helper gives: the XR, observed and desired state, context, every required object,
and the JSON in a ConfigMap's data; bench/decoding.py), the round trip of the same request to a
servicer that answers at once (``null_ms``, bench/null_function.py): what a call costs before
any work, and to one that decodes it so and then answers (``floor_ms``): the least a function
served this way that reads its whole request can take, before it composes anything.

Run: ``uv run python bench/fleet_scale.py`` (``--sizes 100 --repeat 3`` for a quick run,
``--json`` for machine-readable rows).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane.pipeline import (
    CAPABILITIES,
    FunctionCallError,
    ResourcePool,
    run_with_requirements,
)
from modelplane_common.plain import JSON, to_plain, to_struct
from modelplane_common.serving import MIB

sys.path.insert(0, str(Path(__file__).resolve().parent))
import callers
import fleet  # bench/ is not a package
from decoding import decode

FUNCTIONS = (
    "compose-model-deployment",
    "compose-model-cache",
    "compose-inference-cluster",
    "compose-model-replica",
)
BIN = Path(sys.executable).parent  # the workspace virtualenv's console scripts
# A servicer that answers at once (bench/null_function.py): a call's cost before any work;
# and one that decodes the request as every function does first: the least a call can take.
NULL = "null"
FLOOR = "floor"
NULL_FUNCTION = Path(__file__).resolve().parent / "null_function.py"
CALL_TIMEOUT = 600.0
DEFAULT_LIMIT_MIB = 4  # the functions' --max-recv-message-size default, and gRPC's

Row = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Runner:
    """A started function: ``stub`` for reconciling, ``address`` for the timed calls."""

    stub: grpcv1.FunctionRunnerServiceStub
    address: str


@dataclasses.dataclass(frozen=True)
class Timing:
    """Who times the calls, and the caller's numbers for the function, null and floor."""

    caller: callers.Caller
    function: int
    null: int
    floor: int


class CountingPool(ResourcePool):
    """Crossplane's lookups (a Get by name, a List by labels and namespace), counted; a Get
    answered from an index (a cache reads hundreds by name, in a fleet of 50,000 objects)."""

    fetched: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._by_name: dict[tuple[str, str, str, str | None], JSON] = {}
        for obj in reversed(self.objects):  # the first of equals wins, as in a scan
            meta = obj.get("metadata") or {}
            key = (obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace"))
            self._by_name[key] = obj

    def fetch(self, selector: fnv1.ResourceSelector) -> fnv1.Resources:
        if selector.WhichOneof("match") == "match_name" and self.honour_namespaces:
            namespace = selector.namespace if selector.HasField("namespace") else None
            key = (selector.api_version, selector.kind, selector.match_name, namespace)
            obj = self._by_name.get(key)
            found = fnv1.Resources(items=[fnv1.Resource(resource=to_struct(obj))] if obj else [])
        else:
            found = super().fetch(selector)
        self.fetched += len(found.items)
        return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served(name: str, limit_mib: int | None = None) -> Iterator[Runner]:
    """``name`` started as Crossplane's development runtime starts it, called on a channel
    with gRPC's default options. ``limit_mib`` raises both ends' message limit (not as
    deployed: only to time what the default limit refuses)."""
    port = _free_port()
    flags = ["--max-recv-message-size", str(limit_mib)] if limit_mib else []
    options = [("grpc.max_receive_message_length", limit_mib * MIB)] if limit_mib else []
    with tempfile.TemporaryFile() as errors:
        address = f"127.0.0.1:{port}"
        if name in (NULL, FLOOR):
            command = [sys.executable, str(NULL_FUNCTION), address]
            command += [str(limit_mib)] if limit_mib else []
            command += ["--decode"] if name == FLOOR else []
        else:
            command = [str(BIN / name), "--insecure", "--address", address, *flags]
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,  # one JSON line per request: what it logs, not timed
            stderr=errors,
        )
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=120)
            except grpc.FutureTimeoutError:
                errors.seek(0)
                raise RuntimeError(f"{name} did not listen: {errors.read().decode()}") from None
            yield Runner(grpcv1.FunctionRunnerServiceStub(channel), address)
        finally:
            channel.close()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _ms(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def _error(err: grpc.RpcError) -> str:
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    return f"{code.name if code else 'UNKNOWN'}: {details}"


def _fatal(rsp: fnv1.RunFunctionResponse) -> str | None:
    for result in rsp.results:
        if result.severity == fnv1.SEVERITY_FATAL:
            return f"Fatal: {result.message}"
    return None


def _reconcile(
    stub: grpcv1.FunctionRunnerServiceStub, request: fnv1.RunFunctionRequest, pool: CountingPool
) -> tuple[fnv1.RunFunctionResponse | None, str | None]:
    """One reconcile: ``request`` updated in place round by round, so afterwards it is the
    final one. Returns the last response and, if any, the error that ended it."""
    try:
        rsp = run_with_requirements(
            lambda r: stub.RunFunction(r, timeout=CALL_TIMEOUT), request, pool
        )
    except grpc.RpcError as err:
        return None, _error(err)
    except FunctionCallError as err:  # requirements that never settle
        return None, str(err)
    return rsp, _fatal(rsp)


def steady_request(xr: JSON, last: fnv1.RunFunctionResponse, tag: str) -> fnv1.RunFunctionRequest:
    """The reconcile after ``last`` once everything it composed exists: each composed
    resource observed as its controller reports it (bench/fleet.py: Ready, a Job complete),
    and the XR with the status ``last`` wrote."""
    written = to_plain(last.desired.composite.resource).get("status") or {}
    composite = xr | {"status": (xr.get("status") or {}) | written}
    observed = {
        key: fnv1.Resource(
            resource=to_struct(fleet.observed_as_reported(xr, key, to_plain(item.resource)))
        )
        for key, item in last.desired.resources.items()
    }
    return fnv1.RunFunctionRequest(
        meta=fnv1.RequestMeta(tag=tag, capabilities=CAPABILITIES),
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(composite)), resources=observed
        ),
    )


def _timed(
    row: Row,
    timing: Timing,
    request: fnv1.RunFunctionRequest,
    rsp: fnv1.RunFunctionResponse | None,
    error: str | None,
    *,
    repeat: int,
) -> Row:
    """``repeat`` calls of the final ``request`` to the function, the null and the floor
    servicers, alternating with ``repeat`` decodes of it."""
    data = request.SerializeToString()
    row["request_bytes"] = len(data)
    row["caller"] = timing.caller.name
    call = timing.caller.call
    if error is None:
        timing.caller.load(data)
        for target in (timing.function, timing.null, timing.floor):
            call(target)  # untimed: each connection warm, as Crossplane keeps its own
    calls: list[float] = []
    nulls: list[float] = []
    floors: list[float] = []
    decodes: list[float] = []
    for _ in range(repeat):
        decodes.append(_ms(lambda: decode(data)))
        if error is None:
            calls.append(call(timing.function))
            nulls.append(call(timing.null))
            floors.append(call(timing.floor))
    row["call_ms"] = round(min(calls), 1) if calls else None
    row["call_median_ms"] = round(statistics.median(calls), 1) if calls else None
    row["null_ms"] = round(min(nulls), 1) if nulls else None
    row["floor_ms"] = round(min(floors), 1) if floors else None
    row["decode_ms"] = round(min(decodes), 1)
    row["decode_median_ms"] = round(statistics.median(decodes), 1)
    if rsp is not None:
        row["composed"] = len(rsp.desired.resources)
        if row["function"] == "compose-model-deployment":
            row["placed"] = sum(1 for key in rsp.desired.resources if key.startswith("replica-"))
    if error is not None:
        row["error"] = error
    return row


# Reconciles the steady state may take to settle (a cache hydrates 64 clusters at a time).
SETTLE_ROUNDS = 40


def measure(
    name: str,
    runner: tuple[grpcv1.FunctionRunnerServiceStub, Timing],
    built: fleet.Fleet,
    pool: CountingPool,
    repeat: int,
) -> list[Row]:
    """The function's XR reconciled, requirements resolved as Crossplane resolves them: the
    first reconcile (nothing composed yet), then again and again, each time with what the
    last composed observed as its controller reports it, until the function composes the
    same resources as the time before: the steady state, as it is most of the time. The
    first and the steady reconcile are timed on their final request."""
    stub, timing = runner
    xr = built.xrs[name]
    tag = f"{name}-{built.clusters}"
    request = fnv1.RunFunctionRequest(
        meta=fnv1.RequestMeta(tag=tag, capabilities=CAPABILITIES),
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(xr))),
    )
    pool.fetched = 0
    rsp, error = _reconcile(stub, request, pool)
    first = _row(name, built, "first", pool)
    rows = [_timed(first, timing, request, rsp, error, repeat=repeat)]
    if rsp is None or error is not None:
        return rows  # nothing composed: there is no steady state to measure
    for _ in range(SETTLE_ROUNDS):
        composed = set(rsp.desired.resources)
        if name == "compose-model-cache":
            # The clusters publish their cache summaries again: the cache is staged there.
            fleet.restage(pool.objects, {k[len("pvc-") :] for k in composed if k[:4] == "pvc-"})
        request = steady_request(xr, rsp, tag)
        pool.fetched = 0
        rsp, error = _reconcile(stub, request, pool)
        if rsp is None or error is not None or set(rsp.desired.resources) == composed:
            break
    steady = _row(name, built, "steady", pool)
    rows.append(_timed(steady, timing, request, rsp, error, repeat=repeat))
    return rows


def _row(name: str, built: fleet.Fleet, reconcile: str, pool: CountingPool) -> Row:
    return {"function": name, "clusters": built.clusters, "replicas": built.replicas,
            "reconcile": reconcile, "fetched_objects": pool.fetched}  # fmt: skip


def run(
    sizes: list[int],
    repeat: int,
    deployments: int,
    limit_mib: int | None = None,
    *,
    on_row: Callable[[Row], None] | None = None,
    functions: tuple[str, ...] = FUNCTIONS,
    caller: str = "auto",
) -> list[Row]:
    shapes = fleet.learn_shapes()
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        started = [stack.enter_context(served(name, limit_mib)) for name in functions]
        started += [stack.enter_context(served(s, limit_mib)) for s in (NULL, FLOOR)]
        timer = callers.start(caller, [r.address for r in started], limit_mib)
        stack.callback(timer.close)
        null, floor = len(functions), len(functions) + 1
        for size in sizes:
            built = fleet.build(size, shapes, deployments=deployments)
            pool = CountingPool(built.objects)
            for name in (f for f in functions if f in built.xrs):
                index = functions.index(name)
                timing = Timing(timer, index, null, floor)
                for row in measure(name, (started[index].stub, timing), built, pool, repeat):
                    row["limit_mib"] = limit_mib or DEFAULT_LIMIT_MIB
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
    return rows


HEADER = (
    f"{'function':<26} {'clusters':>8} {'replicas':>8} {'reconcile':>9} {'request':>9} "
    f"{'fetched':>8} "
    f"{'call ms min/med':>17} {'decode ms min/med':>19} {'call/decode':>11} {'null ms':>8} "
    f"{'floor ms':>8} {'floor/decode':>12} {'caller':>6}  result"
)


def format_row(row: Row) -> str:
    call = (
        f"{row['call_ms']:.1f}/{row['call_median_ms']:.1f}" if row["call_ms"] is not None else "-"
    )
    decode_ = f"{row['decode_ms']:.1f}/{row['decode_median_ms']:.1f}"
    ratio = (
        f"{row['call_ms'] / row['decode_ms']:.2f}x" if row["call_ms"] and row["decode_ms"] else "-"
    )
    null_ = f"{row['null_ms']:.1f}" if row.get("null_ms") is not None else "-"
    floor = f"{row['floor_ms']:.1f}" if row.get("floor_ms") is not None else "-"
    floor_ratio = (
        f"{row['floor_ms'] / row['decode_ms']:.2f}x"
        if row.get("floor_ms") and row["decode_ms"]
        else "-"
    )
    if "error" in row:
        result = row["error"]
    elif row["function"] == "compose-model-deployment":
        result = f"placed {row['placed']} of {fleet.MEASURED_SPEC['replicas']}"
    else:
        result = f"composed {row.get('composed', 0)}"
    return (
        f"{row['function']:<26} {row['clusters']:>8} {row['replicas']:>8} {row['reconcile']:>9} "
        f"{row['request_bytes'] / 1e6:>8.2f}M {row['fetched_objects']:>8} {call:>17} "
        f"{decode_:>19} {ratio:>11} {null_:>8} {floor:>8} {floor_ratio:>12} "
        f"{row['caller']:>6}  {result}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="cluster counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls (and decodes) per row")
    parser.add_argument(
        "--deployments",
        type=int,
        default=fleet.DEPLOYMENTS,
        help=f"other ModelDeployments, {fleet.REPLICAS_PER_DEPLOYMENT} replicas each",
    )
    parser.add_argument(
        "--max-message-mib", type=int, default=None,
        help="raise the message limit of the functions and the client (not as deployed; "
        "only to time calls the default 4 MiB refuses)",
    )  # fmt: skip
    parser.add_argument(
        "--functions", default=",".join(FUNCTIONS), help="which functions, comma-separated"
    )
    parser.add_argument(
        "--caller", choices=callers.CALLERS, default="auto",
        help="who times the calls: go (bench/caller, as Crossplane calls) or python; "
        "auto: go where Go is installed",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.repeat < 1 or not sizes or min(sizes) < 1 or args.deployments < 0:
        parser.error("--sizes and --repeat must be positive, --deployments not negative")
    if args.max_message_mib is not None and args.max_message_mib < 1:
        parser.error("--max-message-mib must be positive")
    functions = tuple(f for f in args.functions.split(",") if f)
    unknown = sorted(set(functions) - set(FUNCTIONS))
    if unknown or not functions:
        parser.error(f"--functions: unknown {', '.join(unknown)}; one of {', '.join(FUNCTIONS)}")
    printed = None if args.json else (lambda r: print(format_row(r), flush=True))
    if printed:
        print(HEADER, flush=True)
    rows = run(
        sizes, args.repeat, args.deployments, args.max_message_mib, on_row=printed,
        functions=functions, caller=args.caller,
    )  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
