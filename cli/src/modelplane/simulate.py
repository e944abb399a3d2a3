"""``modelplane simulate DIR``: run a directory of manifests on an in-process control plane.

Every manifest is validated and defaulted, every XR is reconciled through its composition (the
repository's functions run as real gRPC servers) and the providers are simulated, round after
round, until nothing changes. The result is printed as a table (or YAML); the exit status says
whether the simulation converged with every Modelplane resource Ready.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import yaml

from modelplane import kube, xrd
from modelplane.controlplane import ControlPlane, Convergence, InvalidManifestError, session
from modelplane.kube import JSON, describe, group_of, key_of, lookup
from modelplane.pipeline import PipelineError


@click.command("simulate")
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "yaml"]),
    default="table",
    show_default=True,
    help="Print a table of every resource, or every resource as YAML.",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Give up when the control plane has not settled after this many rounds.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Give up after this many seconds (function calls included).",
)
def command(directory: Path, output: str, max_rounds: int, timeout: float) -> None:
    """Reconcile every manifest in DIRECTORY until nothing changes, simulating the providers.

    Exits 1 if a manifest is invalid, if the control plane does not settle, or if any
    Modelplane resource is not Ready and Synced at the end.
    """
    try:
        catalog = xrd.catalog()
    except FileNotFoundError as err:
        raise click.ClickException(str(err)) from err
    try:
        deadline = time.monotonic() + timeout
        with session(
            directory, catalog=catalog, timeout=timeout, deadline=deadline, progress=_progress
        ) as plane:
            outcome = plane.run(max_rounds=max_rounds, timeout=timeout)
    except InvalidManifestError as err:
        click.echo(f"invalid manifests:\n{_indent(str(err))}", err=True)
        sys.exit(1)
    except PipelineError as err:
        raise click.ClickException(str(err)) from err
    if output == "yaml":
        click.echo(
            yaml.safe_dump_all(_ordered(plane), sort_keys=False, explicit_start=True), nl=False
        )
    else:
        click.echo(table(plane))
    sys.exit(_verdict(plane, outcome))


def _progress(line: str) -> None:
    click.echo(line, err=True)


def _verdict(plane: ControlPlane, outcome: Convergence) -> int:
    rounds = len(outcome.rounds)
    if not outcome.converged:
        changing = ", ".join(describe(k) for k in outcome.still_changing[:10])
        more = len(outcome.still_changing) - 10
        click.echo(
            f"simulate: did not converge: {outcome.reason}; still changing in the last round: "
            f"{changing}{f' and {more} more' if more > 0 else ''}",
            err=True,
        )
        _report_unready(plane)
        return 1
    click.echo(f"converged after {rounds} round{'s' if rounds != 1 else ''}", err=True)
    return 1 if _report_unready(plane) else 0


def _report_unready(plane: ControlPlane) -> bool:
    unready = [o for o in plane.objects() if _is_modelplane(o) and not _healthy(o)]
    if not unready:
        return False
    click.echo(f"simulate: {len(unready)} Modelplane resource(s) not Ready and Synced:", err=True)
    for obj in unready:
        reasons = []
        conditions = (obj.get("status") or {}).get("conditions") or []
        for found in sorted(conditions, key=lambda c: c.get("type") != "Synced"):
            if found.get("status") != "True":
                reasons.append(
                    f"{found.get('type')}={found.get('status')} {found.get('reason', '')}"
                )
                if found.get("message"):
                    reasons[-1] = f"{reasons[-1].rstrip()}: {found['message']}"
        said = {str(c.get("message")) for c in conditions}
        for event in plane.events.get(key_of(obj), []):
            current = event["lastRound"] == plane.rounds_run  # not a stale, earlier warning
            if event["type"] == "Warning" and current and event["message"] not in said:
                reasons.append(f"event {event['reason']}: {event['message']}")
        click.echo(
            f"  {describe(key_of(obj))}: {'; '.join(reasons) or 'no Ready condition'}", err=True
        )
        # What it composed that a provider, controller or API server refused or holds back
        # (e.g. a kind with no CRD), in their own words.
        for composed in plane.composed_by(obj, recursive=False):
            for found in (composed.get("status") or {}).get("conditions") or []:
                if found.get("status") == "False" and found.get("message"):
                    click.echo(
                        f"    {describe(key_of(composed))}: {found.get('type')}=False: "
                        f"{found['message']}",
                        err=True,
                    )
    return True


def _is_modelplane(obj: JSON) -> bool:
    return kube.is_modelplane_group(group_of(str(obj.get("apiVersion", ""))))


def _healthy(obj: JSON) -> bool:
    """Ready, and its last reconcile succeeded (a failing one leaves a stale Ready)."""
    return all(kube.condition_status(obj, t) == "True" for t in ("Ready", "Synced"))


# --- output -----------------------------------------------------------------------------------


def _tree(plane: ControlPlane) -> list[tuple[int, JSON]]:
    """Objects depth-first: each owner followed by what it composed."""
    children: dict[str, list[JSON]] = {}
    uids = {(o.get("metadata") or {}).get("uid") for o in plane.objects()}
    roots = []
    for obj in plane.objects():
        owner = _controller(obj)
        if owner and owner in uids:
            children.setdefault(owner, []).append(obj)
        else:
            roots.append(obj)
    ordered: list[tuple[int, JSON]] = []

    def visit(obj: JSON, depth: int) -> None:
        ordered.append((depth, obj))
        uid = (obj.get("metadata") or {}).get("uid")
        for child in sorted(children.get(uid, []), key=_resource_name):
            visit(child, depth + 1)

    for root in sorted(roots, key=lambda o: (not _is_modelplane(o), key_of(o))):
        visit(root, 0)
    return ordered


def _ordered(plane: ControlPlane) -> list[JSON]:
    return [obj for _, obj in _tree(plane)]


def _controller(obj: JSON) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _resource_name(obj: JSON) -> tuple[str, str]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return (
        str(annotations.get("crossplane.io/composition-resource-name", "")),
        str((obj.get("metadata") or {}).get("name")),
    )


def table(plane: ControlPlane) -> str:
    """A kubectl-like table; composed resources are indented under their owner."""
    rows = [("KIND", "NAMESPACE", "NAME", "READY", "SYNCED", "STATUS")]
    for depth, obj in _tree(plane):
        metadata = obj.get("metadata") or {}
        rows.append(
            (
                "  " * depth + kind_label(obj),
                str(metadata.get("namespace") or "-"),
                str(metadata.get("name")),
                _condition_cell(obj, "Ready"),
                _condition_cell(obj, "Synced"),
                summary(plane, obj),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "   "
        + row[-1]
        for row in rows
    ).rstrip()


def kind_label(obj: JSON) -> str:
    """``Kind`` for core and Modelplane kinds, ``Kind.group`` for everything else."""
    group = group_of(str(obj.get("apiVersion", "")))
    kind = str(obj.get("kind"))
    if not group or _is_modelplane(obj) or group.endswith(".k8s.io") or "." not in group:
        return kind
    return f"{kind}.{group}"


def _condition_cell(obj: JSON, type_: str) -> str:
    found = kube.condition(obj, type_)
    return str(found.get("status", "Unknown")) if found else "-"


def summary(plane: ControlPlane, obj: JSON) -> str:
    """The few status values a user looks at first."""
    if plane.is_composite(obj):
        return _printer_columns(plane, obj)
    kind = str(obj.get("kind"))
    group = group_of(str(obj.get("apiVersion", "")))
    if kind == "Object" and "kubernetes" in group:
        manifest = lookup(obj, ".status.atProvider.manifest") or lookup(
            obj, ".spec.forProvider.manifest"
        )
        if not isinstance(manifest, dict):
            return ""
        inner = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
        detail = _kubernetes_summary(manifest)
        return f"{inner} {detail}".strip()
    if kind == "Release" and "helm" in group:
        chart = lookup(obj, ".spec.forProvider.chart") or {}
        state = lookup(obj, ".status.atProvider.state") or ""
        return f"{chart.get('name', '')} {chart.get('version', '')} {state}".strip()
    at_provider = lookup(obj, ".status.atProvider")
    if isinstance(at_provider, dict):
        for field in ("endpoint", "nodeCount", "email", "status"):
            if field in at_provider:
                value = at_provider[field]
                if isinstance(value, dict) and "state" in value:
                    return f"state={value['state']}"  # Nebius: atProvider.status.state
                return f"{field}={value}"
        return ""
    return _kubernetes_summary(obj)


def _kubernetes_summary(obj: JSON) -> str:
    kind = obj.get("kind")
    status = obj.get("status") or {}
    if kind in {"Deployment", "StatefulSet", "LeaderWorkerSet"}:
        wanted = (obj.get("spec") or {}).get("replicas", 1)
        return f"ready {status.get('readyReplicas', 0)}/{wanted}"
    if kind == "Job":
        done = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
        return ",".join(done) or "running"
    if kind == "PersistentVolumeClaim":
        return str(status.get("phase", "Pending"))
    if kind == "Service":
        ingress = lookup(obj, ".status.loadBalancer.ingress[0].ip")
        return f"clusterIP={lookup(obj, '.spec.clusterIP')}" + (f" ip={ingress}" if ingress else "")
    if kind == "Gateway":
        address = lookup(obj, ".status.addresses[0].value")
        return f"address={address}" if address else ""
    if kind == "CustomResourceDefinition":
        return "Established" if kube.condition_status(obj, "Established") == "True" else ""
    return ""


def _printer_columns(plane: ControlPlane, obj: JSON) -> str:
    api_version = str(obj.get("apiVersion"))
    definition = plane.catalog.definition_for(api_version, str(obj.get("kind")))
    version = definition.version(api_version) if definition else None
    cells = []
    for column in (version or {}).get("additionalPrinterColumns") or []:
        value = lookup(obj, str(column.get("jsonPath", "")))
        if value is not None and value != "":
            cells.append(f"{str(column['name']).lower()}={value}")
    return " ".join(cells)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
