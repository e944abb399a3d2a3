"""An in-process Crossplane control plane: the engine of ``modelplane simulate``.

It holds an object store (keyed by apiVersion, kind, namespace, name, with uid, generation and
resourceVersion), admits manifests the way the API server would (validation, then structural
defaulting of XRs), and reconciles every XR whose kind has an XRD in apis/ the way Crossplane's
XR reconciler does (spec render.md §3): observed composed resources come from
``spec.crossplane.resourceRefs``, the composition's pipeline runs against real function
servers, composed resources are named, stamped, garbage-collected and server-side applied per
field manager, and the XR gets its status, Ready and Synced. Providers are simulated between
reconciles (``modelplane.providers``). Rounds repeat until nothing changes.

Scenario tests drive it through ``session()``: ``load``/``apply``/``patch``/``delete`` objects,
``run`` to a fixed point, ``providers.inject`` a failure, read objects back with
``find``/``get``/``list`` (design/simulate.md).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import datetime
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml
from modelplane_common.capacity_summary import DELETION_ATTEMPT_ANNOTATION
from modelplane_common.function import CLOCK_CONTEXT_KEY

from modelplane import apiserver, kube, usages, xrd
from modelplane.kube import JSON, ObjectKey, describe, group_of, key_of, meta
from modelplane.pipeline import (
    SYSTEM_CONDITION_TYPES,
    FunctionHost,
    PipelineError,
    PipelineResult,
    child_name,
    repository_functions,
    result_event,
    run_pipeline,
)
from modelplane.project import function_directory
from modelplane.providers import (
    NAMESPACED_PROVIDER_GROUPS,
    PROVIDER_CONFIG_KINDS,
    WORLD_DEPENDENT_KINDS,
    ProviderSimulator,
)

RESOURCE_NAME_ANNOTATION = "crossplane.io/composition-resource-name"
COMPOSITE_LABEL = "crossplane.io/composite"
CLAIM_LABELS = ("crossplane.io/claim-name", "crossplane.io/claim-namespace")
PAUSED_ANNOTATION = "crossplane.io/paused"
FINALIZER = "composite.apiextensions.crossplane.io"
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
_XR_OWN = ("spec", "crossplane")
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_UID_NAMESPACE = uuid.UUID("6f1e2b7c-6d6f-4465-8c70-6c616e650000")


class PipelineRunner(Protocol):
    """Runs one composition's pipeline (``modelplane.pipeline.run_pipeline`` bound to a host)."""

    def __call__(
        self,
        composition: JSON,
        xr: JSON,
        observed: dict[str, JSON],
        required: list[JSON],
        context: JSON | None = None,
    ) -> PipelineResult: ...


class HostedRunner:
    """The real runner: every step's function is a gRPC server hosted by a FunctionHost."""

    def __init__(self, host: FunctionHost) -> None:
        self.host = host

    def __call__(
        self,
        composition: JSON,
        xr: JSON,
        observed: dict[str, JSON],
        required: list[JSON],
        context: JSON | None = None,
    ) -> PipelineResult:
        return run_pipeline(self.host, composition, xr, observed, required, context)


@contextlib.contextmanager
def session(
    directory: Path | None = None,
    *,
    catalog: xrd.Catalog | None = None,
    functions: list[JSON] | None = None,
    servicers: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    deadline: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[ControlPlane]:
    """A control plane whose pipelines call real gRPC functions, for scripts and scenario tests.

    Repository functions are hosted in-process; ``functions`` (Crossplane Function objects, e.g.
    Development targets) and ``servicers`` (name -> servicer) add or replace some. Manifests in
    ``directory`` are loaded first; Function objects found there are used too. ``timeout``
    bounds each function call, ``deadline`` (a ``time.monotonic()`` value) all of them.
    """
    plane = ControlPlane(runner=_unstarted, catalog=catalog, progress=progress)
    if directory is not None:
        plane.load(directory)
    listed = [*(functions or []), *plane.functions]
    names = {function_directory(str((fn.get("metadata") or {}).get("name"))) for fn in listed}
    everything = listed + [
        {"apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": name}}
        for name in sorted(repository_functions())
        if name not in names
    ]
    with FunctionHost(
        functions=everything, timeout=timeout, servicers=servicers, packaged=True
    ) as host:
        host.deadline = deadline
        plane.runner = HostedRunner(host)
        yield plane


def _unstarted(*_: object) -> PipelineResult:
    raise ComposeError("no function host is running")


class InvalidManifestError(Exception):
    """A manifest the API server would reject; the message names the file, object and field."""


class ComposeError(Exception):
    """A reconcile that cannot complete (Synced=False, nothing deleted or applied).

    ``conditions`` and ``results`` are what pipeline steps returned before a failure; the
    reconciler still applies and emits them.
    """

    def __init__(
        self, message: str, conditions: list[JSON] | None = None, results: list[JSON] | None = None
    ) -> None:
        super().__init__(message)
        self.conditions = conditions or []
        self.results = results or []


@dataclasses.dataclass
class RoundReport:
    number: int
    reconciled: int
    changed: list[ObjectKey]

    def line(self) -> str:
        return f"round {self.number}: {self.reconciled} reconciled, {len(self.changed)} changed"


@dataclasses.dataclass
class Convergence:
    converged: bool
    rounds: list[RoundReport]
    reason: str = ""  # why it stopped without converging

    @property
    def still_changing(self) -> list[ObjectKey]:
        return self.rounds[-1].changed if self.rounds and not self.converged else []


# (object, source file) -> problems as ``source: Kind/name: field: message`` lines.
Validator = Callable[[JSON, str], list[str]]
# What each cluster serves, the config resolver, a fingerprint, the namespaces each cluster has.
Discovered = tuple[apiserver.Discovery, apiserver.ClusterResolver, int, dict[str, frozenset[str]]]


class ControlPlane:
    """The object store, the XR reconciler and the simulated providers."""

    def __init__(
        self,
        runner: PipelineRunner,
        catalog: xrd.Catalog | None = None,
        providers: ProviderSimulator | None = None,
        validator: Validator | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.runner = runner
        self.catalog = catalog if catalog is not None else xrd.catalog()
        self.providers = providers or ProviderSimulator()
        self.validator = validator if validator is not None else default_validator(self.catalog)
        self.progress = progress
        self.functions: list[JSON] = []  # pkg.crossplane.io Functions found by load()
        self.events: dict[ObjectKey, list[JSON]] = {}
        self.rounds_run = 0
        self._objects: dict[ObjectKey, JSON] = {}
        # (object, field manager) -> (last applied intent, resourceVersion it produced)
        self._applied: dict[tuple[ObjectKey, str], tuple[JSON, str | None]] = {}
        self._serial = 0
        self._changed: set[ObjectKey] = set()
        self._verdicts: dict[str, list[str]] = {}
        self._provider_stamps: dict[ObjectKey, tuple[Any, int, int, int]] = {}
        # (what each cluster serves, config resolver, fingerprint), dropped when it may change
        self._discovery: Discovered | None = None
        # Deletes a Usage denied (or a Usage's finalizer holds), retried every round: key -> why
        self._pending_deletes: dict[ObjectKey, str] = {}
        self.providers.admission = self.remote_admission
        self._clock_offset = datetime.timedelta(0)
        # While reconcile_together runs: the one view of the world every reconcile reads.
        self._view: list[JSON] | None = None

    # --- reading ------------------------------------------------------------------------------

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> JSON | None:
        return self._objects.get((api_version, kind, namespace or "", name))

    def list(
        self,
        api_version: str | None = None,
        kind: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[JSON]:
        """Objects sorted by key, filtered like ``kubectl get``."""
        found = []
        for key in sorted(self._objects):
            obj = self._objects[key]
            if api_version is not None and key[0] != api_version:
                continue
            if kind is not None and key[1] != kind:
                continue
            if namespace is not None and key[2] != namespace:
                continue
            own = (obj.get("metadata") or {}).get("labels") or {}
            if labels and any(own.get(k) != v for k, v in labels.items()):
                continue
            found.append(obj)
        return found

    def find(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        """An object by kind and name, any apiVersion: ``find("ModelDeployment", "q", "ml")``."""
        for key, obj in self._objects.items():
            if key[1] == kind and key[3] == name and key[2] == (namespace or ""):
                return obj
        return None

    def key(self, kind: str, name: str, namespace: str | None = None) -> ObjectKey:
        """The store key of an existing object (for ``patch`` and ``delete``)."""
        obj = self.find(kind, name, namespace)
        if obj is None:
            raise KeyError(f"{kind}/{namespace + '/' if namespace else ''}{name} does not exist")
        return key_of(obj)

    def objects(self) -> list[JSON]:
        return [self._objects[key] for key in sorted(self._objects)]

    def composed_by(self, xr: JSON, recursive: bool = True) -> list[JSON]:
        """Objects controlled by ``xr`` (and, recursively, by its composed XRs)."""
        uid = (xr.get("metadata") or {}).get("uid")
        found = [o for o in self.objects() if _controller_uid(o) == uid]
        if recursive:
            for child in list(found):
                if self.is_composite(child):
                    found.extend(self.composed_by(child))
        return found

    def is_composite(self, obj: JSON) -> bool:
        return self._definition(obj) is not None

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        definition = self.catalog.definition_for(api_version, kind)
        if definition is not None:
            return definition.namespaced
        return kube.kind_is_namespaced(api_version, kind)

    # --- writing (what a user or a scenario does) ---------------------------------------------

    def load(self, path: Path) -> list[ObjectKey]:
        """Apply every manifest in a file or (recursively) a directory, validating all first."""
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())
        )
        if not files:
            raise InvalidManifestError(f"{path}: no .yaml or .yml files found")
        documents: list[tuple[str, JSON]] = []
        problems: list[str] = []
        for file in files:
            try:
                docs = [d for d in yaml.safe_load_all(file.read_text()) if d is not None]
            except (yaml.YAMLError, UnicodeDecodeError) as err:
                problems.append(f"{file}: not valid YAML: {_first_line(err)}")
                continue
            for index, doc in enumerate(docs):
                if not isinstance(doc, dict):
                    problems.append(f"{file}: document {index + 1} is not a mapping")
                    continue
                if group_of(str(doc.get("apiVersion", ""))) == "pkg.crossplane.io":
                    if doc.get("kind") == "Function":
                        self.functions.append(doc)
                    continue
                problems.extend(self.check(doc, str(file)))
                documents.append((str(file), doc))
        if problems:
            raise InvalidManifestError("\n".join(problems))
        return [self._store_applied(doc) for _, doc in documents]

    def check(self, obj: JSON, source: str = "<input>") -> list[str]:
        """What the API server would reject: ``source: Kind/name: field: message`` lines."""
        kind = obj.get("kind")
        name = (obj.get("metadata") or {}).get("name")
        label = f"{source}: {kind or '?'}/{name or '?'}"
        if obj.get("apiVersion") and kind and not name:
            return [f"{label}: metadata.name: Required value"]
        group = group_of(str(obj.get("apiVersion", "")))
        if kind and kube.is_modelplane_group(group) and not self.is_composite(obj):
            return [
                f"{label}: no CompositeResourceDefinition in apis/ serves "
                f"apiVersion {obj.get('apiVersion')} kind {kind}"
            ]
        if kind and obj.get("apiVersion") and not self.serves(str(obj["apiVersion"]), kind):
            return [f"{label}: {apiserver.no_matches(str(obj['apiVersion']), kind)}"]
        return self.validator(obj, source)

    # --- discovery (the strict API server, decision D8) -----------------------------------------

    def discovery(self) -> Discovered:
        """What every cluster serves, the namespaces each has and the config resolver,
        recomputed only after a CRD, Release, provider config or wrapped Namespace changed;
        with a fingerprint of it."""
        if self._discovery is None:
            objects = list(self._objects.values())
            resolver = apiserver.ClusterResolver(objects)
            served = apiserver.discover(objects, resolver=resolver)
            namespaces = apiserver.namespaces(objects, resolver)
            fingerprint = hash((tuple(sorted(served.items())), tuple(sorted(namespaces.items()))))
            self._discovery = (served, resolver, fingerprint, namespaces)
        return self._discovery

    def serves(self, api_version: str, kind: str, cluster: str = apiserver.CONTROL_PLANE) -> bool:
        """Whether ``cluster`` has ``kind`` built in or its CRD installed and Established."""
        if cluster == apiserver.CONTROL_PLANE and self.catalog.definition_for(api_version, kind):
            return True
        return apiserver.serves(self.discovery()[0], cluster, api_version, kind)

    def remote_admission(self, obj: JSON, manifest: JSON) -> str | None:
        """Why the cluster an Object targets refuses its manifest (provider-kubernetes' words),
        or None. A cluster that cannot be told (unknown config) is given the benefit."""
        cluster = self.discovery()[1].cluster_of(obj)
        if cluster is None:
            return None
        api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
        if not self.serves(api_version, kind, cluster):
            return f"observe failed: cannot get object: {apiserver.no_matches(api_version, kind)}"
        existing = self.discovery()[3].get(cluster, apiserver.BUILTIN_NAMESPACES)
        missing = apiserver.missing_namespace(manifest, existing)
        if missing:
            return f"create failed: cannot create object: {missing}"
        problems = self._composed_problems(manifest)
        if problems:
            return f"create failed: cannot create object: {'; '.join(problems)}"
        return None

    def apply(self, obj: JSON, source: str = "<input>") -> ObjectKey:
        """Create or update an object as ``kubectl apply`` would (spec replaced, status kept)."""
        problems = self.check(obj, source)
        if problems:
            raise InvalidManifestError("\n".join(problems))
        return self._store_applied(obj)

    def _store_applied(self, obj: JSON) -> ObjectKey:
        incoming = self._admit(copy.deepcopy(obj))
        for field in _SERVER_METADATA:
            meta(incoming).pop(field, None)
        key = key_of(incoming)
        existing = self._objects.get(key)
        if existing is None:
            if self._terminating(key[2]):
                raise InvalidManifestError(_forbidden_in_terminating(key))
            incoming.pop("status", None)
            meta(incoming).pop("deletionTimestamp", None)  # the API server sets it, never a create
            self._put(incoming)
            return key
        updated = copy.deepcopy(existing)
        for field, value in incoming.items():
            if field not in {"metadata", "status"}:
                updated[field] = value
        for field in list(updated):
            if field not in incoming and field not in {"apiVersion", "kind", "metadata", "status"}:
                del updated[field]
        # Crossplane owns spec.crossplane; a user's apply without it leaves it alone.
        crossplane = (existing.get("spec") or {}).get("crossplane")
        if crossplane is not None and "crossplane" not in (updated.get("spec") or {}):
            updated.setdefault("spec", {})["crossplane"] = crossplane
        for field in ("labels", "annotations"):
            if field in meta(incoming):
                meta(updated)[field] = {
                    **(meta(existing).get(field) or {}),
                    **meta(incoming)[field],
                }
        self._put(self._admit(updated))
        return key

    def patch(self, key: ObjectKey, patch: JSON) -> None:
        """Merge-patch a stored object (maps merged, lists replaced), e.g. to scale it."""
        existing = self._objects.get(key)
        if existing is None:
            raise KeyError(describe(key))
        self._put(self._admit(kube.deep_merge(existing, patch)))

    def strip_status(self) -> None:
        """Every object loses its status, as when a control plane is restored from a backup
        (statuses are not restored; controllers and providers must write them again)."""
        for key in sorted(self._objects):
            obj = copy.deepcopy(self._objects[key])
            if obj.pop("status", None) is not None:
                self._put(obj)

    @property
    def pending_deletions(self) -> dict[ObjectKey, str]:
        """Objects whose deletion a Usage holds back, with the reason (retried every round)."""
        return dict(self._pending_deletes)

    def delete(self, key: ObjectKey, *, collected: bool = False) -> list[ObjectKey]:
        """Delete an object (``kubectl delete``, background propagation) and, as Kubernetes
        garbage collection does, everything it owns; returns what is gone.

        A delete a Usage denies leaves the object in place (an event says why) and is sent
        again every round while the Usage has ``replayDeletion`` or the garbage collector
        (``collected``) is the one deleting; a Usage with a ``by`` stays until its user is
        gone (usages.py)."""
        obj = self._objects.get(key)
        if obj is None:
            self._pending_deletes.pop(key, None)
            return []
        everything = list(self._objects.values())
        found = usages.protections(obj, everything)
        if found:
            message = usages.in_use_message(found)
            self._event(key, "Warning", "DeletionBlocked", message)
            self._record_deletion_attempt(key, obj)
            if collected or any(p.replay for p in found) or key in self._pending_deletes:
                self._pending_deletes[key] = message
            return []
        if usages.is_usage(obj):
            user = usages.waits_for_user(obj, everything)
            if user is not None:
                self._pending_deletes[key] = (
                    f"waiting for {user.get('kind')}/{meta(user).get('name')} to be deleted"
                )
                return []
        contents: list[ObjectKey] = []
        if key[:2] == ("v1", "Namespace"):
            contents = self._empty_namespace(key, obj)
            if key in self._pending_deletes:  # something in it is left: it stays Terminating
                return contents
        if self._stays_deleting(key, obj):
            return []
        self._pending_deletes.pop(key, None)
        del self._objects[key]
        self._changed.add(key)
        if apiserver.changes_discovery(obj):
            self._discovery = None
        for applied in [a for a in self._applied if a[0] == key]:
            del self._applied[applied]
        self.events.pop(key, None)
        deleted = [key, *contents]
        uid = meta(obj).get("uid")
        for other_key, other in sorted(self._objects.items()):
            owners = meta(other).get("ownerReferences") or []
            if any(owner.get("uid") == uid for owner in owners):
                deleted.extend(self.delete(other_key, collected=True))
        return deleted

    def _empty_namespace(self, key: ObjectKey, namespace: JSON) -> list[ObjectKey]:
        """The namespace controller: the namespace turns Terminating (nothing new may be
        created in it) and everything in it is deleted; what went. While anything is left the
        namespace stays, and its deletion is sent again every round."""
        if not meta(namespace).get("deletionTimestamp"):
            terminating = copy.deepcopy(namespace)
            meta(terminating)["deletionTimestamp"] = self.now()
            terminating["status"] = {**(namespace.get("status") or {}), "phase": "Terminating"}
            self._put(terminating)
        gone: list[ObjectKey] = []
        for other_key in sorted(k for k in self._objects if k[2] == key[3]):
            gone.extend(self.delete(other_key, collected=True))
        left = sorted(k for k in self._objects if k[2] == key[3])
        if left:
            self._pending_deletes[key] = f"{len(left)} object(s) in it are not deleted yet"
        else:
            self._pending_deletes.pop(key, None)
        return gone

    def _terminating(self, namespace: str) -> bool:
        found = self._objects.get(("v1", "Namespace", "", namespace)) if namespace else None
        return found is not None and bool(meta(found).get("deletionTimestamp"))

    def _stays_deleting(self, key: ObjectKey, obj: JSON) -> bool:
        """A provider's namespaced managed resource (an Object, a Release) deleted in a
        namespace being deleted is never deleted: its provider must record its provider
        config's use in that namespace before it acts (a ProviderConfigUsage), and the API
        server refuses anything new in a terminating namespace (crossplane-runtime#1150, as the
        real plane showed). It stays deleting, its remote objects stay, and so does the
        namespace. Marked so here, said in its Synced condition."""
        if not self._terminating(key[2]) or key[1] not in ("Object", "Release"):
            return False
        if group_of(key[0]) not in NAMESPACED_PROVIDER_GROUPS:
            return False
        if not meta(obj).get("deletionTimestamp"):
            stuck = copy.deepcopy(obj)
            meta(stuck)["deletionTimestamp"] = self.now()
            status = stuck.setdefault("status", {})
            status["conditions"] = [
                *(c for c in status.get("conditions") or [] if c.get("type") != "Synced"),
                _condition("Synced", "False", "ReconcileError", _terminating_message(key, obj)),
            ]
            self._put(stuck)
        return True

    def _retry_deletions(self) -> None:
        """Send every held-back delete again (replayed deletion, garbage collection)."""
        for key in sorted(self._pending_deletes):
            self.delete(key, collected=True)

    # --- the loop -----------------------------------------------------------------------------

    def run(self, max_rounds: int = 100, timeout: float | None = None) -> Convergence:
        """Reconcile and simulate providers, round after round, until a round changes nothing."""
        deadline = None if timeout is None else time.monotonic() + timeout
        rounds: list[RoundReport] = []
        for _ in range(max_rounds):
            report = self.round()
            rounds.append(report)
            if self.progress:
                self.progress(report.line())
            if not report.changed:
                return Convergence(True, rounds)
            if deadline is not None and time.monotonic() > deadline:
                return Convergence(False, rounds, f"timed out after {timeout:g}s")
        return Convergence(False, rounds, f"no fixed point after {max_rounds} rounds")

    def round(self) -> RoundReport:
        """Reconcile every XR once (parents first), then let the providers observe."""
        self.rounds_run += 1
        self._changed = set()
        self._retry_deletions()
        composites = sorted(
            (key for key, obj in self._objects.items() if self.is_composite(obj)),
            key=lambda key: (self._depth(key), key),
        )
        for key in composites:
            self.reconcile(key)
        self.observe_providers()
        return RoundReport(self.rounds_run, len(composites), sorted(self._changed))

    def observe_providers(self) -> None:
        by_kind: dict[str, list[JSON]] = {}
        for obj in self._objects.values():
            by_kind.setdefault(str(obj.get("kind")), []).append(obj)

        def world(kind: str) -> list[JSON]:
            return by_kind.get(kind, [])

        # Remote objects depend on their provider configs existing.
        configs = hash(frozenset(key for key in self._objects if key[1] in PROVIDER_CONFIG_KINDS))
        for key in sorted(self._objects):
            # What a cluster serves decides whether an Object's manifest is accepted.
            served = self.discovery()[2] if key[1] == "Object" else 0
            obj = self._objects[key]
            if self.is_composite(obj):
                continue
            # Providers are deterministic: an object they already answered for is skipped.
            stamp = (meta(obj).get("resourceVersion"), self.providers.revision, configs, served)
            if self._provider_stamps.get(key) == stamp and key[1] not in WORLD_DEPENDENT_KINDS:
                continue
            updated = self.providers.observe(obj, world)
            if updated is not None:
                self._put(updated)
            stored = self._objects[key]
            self._provider_stamps[key] = (
                meta(stored).get("resourceVersion"),
                self.providers.revision,
                configs,
                served,
            )

    # --- one reconcile (render.md §3) ---------------------------------------------------------

    def reconcile_together(self, keys: Iterable[ObjectKey]) -> None:
        """Reconcile several XRs from one view of the world, as Crossplane's concurrent
        workers do: each reads its required resources as they were before any of them wrote
        (its own composed resources are still read as they are)."""
        self._view = copy.deepcopy(self.objects())
        try:
            for key in keys:
                self.reconcile(key)
        finally:
            self._view = None

    def reconcile(self, key: ObjectKey) -> None:
        stored = self._objects.get(key)
        definition = self._definition(stored) if stored else None
        if stored is None or definition is None:
            return
        xr = copy.deepcopy(stored)
        metadata = meta(xr)
        if (metadata.get("annotations") or {}).get(PAUSED_ANNOTATION) == "true":
            self._set_conditions(
                xr,
                [
                    _condition(
                        "Synced",
                        "False",
                        "ReconcilePaused",
                        "Reconciliation is paused via the pause annotation",
                    )
                ],
            )
            self._put(xr)
            return
        if FINALIZER not in (metadata.get("finalizers") or []):
            metadata["finalizers"] = [*(metadata.get("finalizers") or []), FINALIZER]
        metadata.setdefault("labels", {}).setdefault(COMPOSITE_LABEL, metadata["name"])
        crossplane = xr.setdefault("spec", {}).setdefault("crossplane", {})
        composition = self._select_composition(xr)
        if composition is None:
            return
        crossplane["compositionRef"] = {"name": meta(composition).get("name")}
        try:
            observed = self._observed(xr, definition.namespaced)
            result = self._run_pipeline(composition, xr, observed)
            desired = {
                name: self._render(
                    xr, definition.namespaced, name, resource.body, observed.get(name)
                )
                for name, resource in sorted(result.resources.items())
            }
        except ComposeError as err:
            self._emit(key, err.results)
            self._fail(xr, f"cannot compose resources: {err}", err.conditions)
            return
        for name, obj in observed.items():
            if name not in desired:
                self.delete(key_of(obj), collected=True)
        crossplane["resourceRefs"] = sorted(
            (_reference(body, definition.namespaced) for body in desired.values()),
            key=lambda ref: (ref["apiVersion"], ref["kind"], ref["name"]),
        )
        unsynced = []
        for name, body in desired.items():
            if not self.serves(str(body["apiVersion"]), str(body["kind"])):
                # Not an Invalid error: the reconcile fails at this resource (render.md §3.3).
                self._emit(key, result.results)
                refusal = apiserver.no_matches(str(body["apiVersion"]), str(body["kind"]))
                self._fail(
                    xr,
                    f'cannot compose resources: cannot apply composed resource "{name}": {refusal}',
                    result.conditions,
                )
                return
            problem = self._server_side_apply(xr, body)
            if problem:
                unsynced.append(name)
                self._event(key, "Warning", "ComposeResources", f"cannot apply {name!r}: {problem}")
        self._emit(key, result.results)
        self._write_status(xr, result, unsynced)
        self._put(xr)

    def _select_composition(self, xr: JSON) -> JSON | None:
        """An explicit spec.crossplane.compositionRef, else the one composition for the type."""
        type_ = (str(xr["apiVersion"]), str(xr["kind"]))
        candidates = [body for _, body in self.catalog.compositions.get(type_, [])]
        wanted = ((xr["spec"].get("crossplane") or {}).get("compositionRef") or {}).get("name")
        if wanted:
            chosen = [c for c in candidates if meta(c).get("name") == wanted]
            if not chosen:
                self._fail(
                    xr,
                    f'cannot select composition: Composition "{wanted}" (spec.crossplane.'
                    f"compositionRef) does not exist for {type_[0]} {type_[1]}",
                )
                return None
            return chosen[0]
        if not candidates:
            self._fail(
                xr,
                f"cannot select composition: no Composition in apis/ has compositeTypeRef "
                f"{type_[0]} {type_[1]}",
            )
            return None
        return candidates[0]

    def _run_pipeline(
        self, composition: JSON, xr: JSON, observed: dict[str, JSON]
    ) -> PipelineResult:
        try:
            # The simulated clock reaches the functions (failover grace periods judge it).
            context = {CLOCK_CONTEXT_KEY: self.now()}
            world = self._view if self._view is not None else self.objects()
            return self.runner(composition, xr, observed, world, context)
        except PipelineError as err:
            raise ComposeError(str(err), err.conditions, err.results) from err
        except Exception as err:  # a function host failure is the XR's problem, not a crash
            raise ComposeError(f"{type(err).__name__}: {err}") from err

    def _observed(self, xr: JSON, namespaced: bool) -> dict[str, JSON]:
        """Composed resources found through resourceRefs (render.md §3.2)."""
        observed: dict[str, JSON] = {}
        uid = meta(xr).get("uid")
        refs = ((xr.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
        for ref in refs:
            if not ref.get("name"):
                continue
            api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
            namespace = meta(xr).get("namespace") if namespaced else ref.get("namespace")
            if not self.is_namespaced(api_version, kind):
                namespace = None
            obj = self.get(api_version, kind, str(ref["name"]), namespace)
            if obj is None:
                continue
            controller = _controller_uid(obj)
            if controller is not None and controller != uid:
                continue  # controlled by someone else: treated as absent
            resource_name = (meta(obj).get("annotations") or {}).get(RESOURCE_NAME_ANNOTATION)
            if not resource_name:
                raise ComposeError(
                    f"cannot get composed resource {describe(key_of(obj))}: it has no "
                    f"{RESOURCE_NAME_ANNOTATION} annotation"
                )
            observed[resource_name] = obj
        return observed

    def _render(
        self, xr: JSON, namespaced: bool, name: str, body: JSON, observed: JSON | None
    ) -> JSON:
        """A desired resource's identity and Crossplane metadata (render.md §2.5, §3.3)."""
        obj = copy.deepcopy(body)
        obj.pop("status", None)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version or not kind:
            raise ComposeError(f'composed resource "{name}" has no apiVersion or kind')
        metadata = meta(obj)
        for field in _SERVER_METADATA:
            metadata.pop(field, None)
        if observed is not None:
            for field in ("name", "namespace", "generateName"):
                if field in meta(observed):
                    metadata[field] = meta(observed)[field]
                else:
                    metadata.pop(field, None)
        kind_namespaced = self.is_namespaced(str(api_version), str(kind))
        if namespaced:
            if not kind_namespaced:
                raise ComposeError(
                    f'cannot apply cluster scoped composed resource "{name}" ({kind}.'
                    f"{group_of(str(api_version))}) for namespaced composite resource "
                    f"{describe(key_of(xr))}"
                )
            metadata["namespace"] = meta(xr)["namespace"]
        elif not kind_namespaced:
            metadata.pop("namespace", None)
        elif not metadata.get("namespace"):
            raise ComposeError(
                f'composed resource "{name}" ({kind}) is namespaced but has no '
                "metadata.namespace; a cluster-scoped composite must set it"
            )
        xr_labels = meta(xr).get("labels") or {}
        prefix = xr_labels.get(COMPOSITE_LABEL) or meta(xr)["name"]
        if not metadata.get("name") and not metadata.get("generateName"):
            metadata["generateName"] = f"{prefix}-"
        metadata.setdefault("annotations", {})[RESOURCE_NAME_ANNOTATION] = name
        labels = metadata.setdefault("labels", {})
        labels[COMPOSITE_LABEL] = prefix
        if all(label in xr_labels for label in CLAIM_LABELS):
            for label in CLAIM_LABELS:
                labels[label] = xr_labels[label]
        uid = str(meta(xr).get("uid", ""))
        references = metadata.get("ownerReferences") or []
        for ref in references:
            if ref.get("controller") and ref.get("uid") != uid:
                raise ComposeError(
                    f'composed resource "{name}" is already controlled by '
                    f"{ref.get('kind')} {ref.get('name')} (UID {ref.get('uid')})"
                )
        metadata["ownerReferences"] = [r for r in references if r.get("uid") != uid] + [
            {
                "apiVersion": xr["apiVersion"],
                "kind": xr["kind"],
                "name": meta(xr)["name"],
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        if not metadata.get("name"):
            metadata["name"] = child_name(str(metadata["generateName"]), uid, name)
        if not kube.valid_name(metadata["name"], str(api_version), str(kind)):
            raise ComposeError(
                f'composed resource "{name}" has an invalid name {metadata["name"]!r}: '
                "it must be a lowercase RFC 1123 subdomain"
            )
        return obj

    def _server_side_apply(self, xr: JSON, body: JSON) -> str | None:
        """SSA with force, one field manager per XR and kind; a problem string if Invalid."""
        key = key_of(body)
        existing = self._objects.get(key)
        if existing is not None:
            controller = _controller_uid(existing)
            if controller is not None and controller != meta(xr).get("uid"):
                return f"{describe(key)} is controlled by another resource (UID {controller})"
        group_kind = f"{body['kind']}.{group_of(str(body['apiVersion']))}"
        digest = hashlib.sha256((meta(xr)["name"] + group_kind).encode()).hexdigest()
        manager = f"apiextensions.crossplane.io/composed/{digest}"
        previous, produced = self._applied.get((key, manager), (None, None))
        unchanged = existing is not None and produced == meta(existing).get("resourceVersion")
        if unchanged and previous == body:
            return None  # the same intent onto the object exactly as we left it: a no-op
        if existing is None and self._terminating(key[2]):
            return _forbidden_in_terminating(key)
        problems = self._composed_problems(body)
        if problems:
            return "; ".join(problems)
        live = copy.deepcopy(existing) if existing is not None else {}
        if previous is not None:
            kept = set(kube.leaf_paths(body))
            for (other_key, other), (intent, _) in self._applied.items():
                if other_key == key and other != manager:
                    kept.update(kube.leaf_paths(intent))  # co-owned fields stay
            for path in kube.leaf_paths(previous):
                # status and an XR's spec.crossplane belong to other writers too.
                if path not in kept and path[:1] != ("status",) and path[:2] != _XR_OWN:
                    kube.remove_path(live, path)
        live = _merge_applied(live, body)
        self._put(self._admit(live))
        stored = meta(self._objects[key]).get("resourceVersion")
        self._applied[(key, manager)] = (copy.deepcopy(body), stored)
        return None

    def _composed_problems(self, body: JSON) -> list[str]:
        """The API server's verdict on a composed object (cached: bodies repeat every round)."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if digest not in self._verdicts:
            self._verdicts[digest] = self.validator(body, "<composed>")
        return self._verdicts[digest]

    def _write_status(self, xr: JSON, result: PipelineResult, unsynced: list[str]) -> None:
        conditions = (xr.get("status") or {}).get("conditions") or []
        status = copy.deepcopy((result.desired_composite or {}).get("status") or {})
        status.pop("conditions", None)
        status["conditions"] = conditions
        xr["status"] = status
        updates = [
            _condition(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in result.conditions
            if c.get("type") not in SYSTEM_CONDITION_TYPES
        ]
        if unsynced:
            updates.append(
                _condition(
                    "Synced",
                    "False",
                    "ReconcileError",
                    f"Unsynced resources: {format_list(unsynced)}",
                )
            )
        else:
            updates.append(_condition("Synced", "True", "ReconcileSuccess"))
        updates.append(_ready_condition(result))
        self._set_conditions(xr, updates)

    def _emit(self, key: ObjectKey, results: list[JSON]) -> None:
        """Non-fatal function results become events on the XR, as the reconciler records them."""
        for result in results:
            self._event(key, *result_event(result))

    def _fail(self, xr: JSON, message: str, returned: list[JSON] | None = None) -> None:
        """Synced=False; custom conditions this run did not return become Unknown (§3.4)."""
        returned = [c for c in returned or [] if c.get("type") not in SYSTEM_CONDITION_TYPES]
        types = {c.get("type") for c in returned}
        updates = [
            _condition(c["type"], "Unknown", "FatalError", c.get("message", ""))
            for c in (xr.get("status") or {}).get("conditions") or []
            if c.get("type") not in SYSTEM_CONDITION_TYPES and c.get("type") not in types
        ]
        updates += [
            _condition(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in returned
        ]
        updates.append(_condition("Synced", "False", "ReconcileError", message))
        self._set_conditions(xr, updates)
        self._event(key_of(xr), "Warning", "ReconcileError", message)
        self._put(xr)

    def _set_conditions(self, obj: JSON, updates: Iterable[JSON]) -> None:
        conditions = obj.setdefault("status", {}).setdefault("conditions", [])
        for update in updates:
            for index, current in enumerate(conditions):
                if current.get("type") == update["type"]:
                    same = all(
                        current.get(f, "") == update.get(f, "")
                        for f in ("status", "reason", "message")
                    )
                    if not same:
                        conditions[index] = {**update, "lastTransitionTime": self.now()}
                    break
            else:
                conditions.append({**update, "lastTransitionTime": self.now()})

    def _record_deletion_attempt(self, key: ObjectKey, obj: JSON) -> None:
        """The Usage webhook patches the object it refused to delete with the propagation
        policy (background here), once; functions may read it (compose-inference-cluster)."""
        annotations = meta(obj).get("annotations") or {}
        if annotations.get(DELETION_ATTEMPT_ANNOTATION) == usages.BACKGROUND:
            return
        updated = copy.deepcopy(obj)
        meta(updated)["annotations"] = {
            **annotations,
            DELETION_ATTEMPT_ANNOTATION: usages.BACKGROUND,
        }
        self._put(updated)

    def _event(self, key: ObjectKey, type_: str, reason: str, message: str) -> None:
        events = self.events.setdefault(key, [])
        for event in events:
            if (event["type"], event["reason"], event["message"]) == (type_, reason, message):
                event["count"] += 1
                event["lastRound"] = self.rounds_run
                return
        events.append(
            {
                "type": type_,
                "reason": reason,
                "message": message,
                "count": 1,
                "lastRound": self.rounds_run,
            }
        )

    # --- the store ----------------------------------------------------------------------------

    def now(self) -> str:
        """Simulated time: one second per round (plus ``advance``), so output is reproducible."""
        moment = _EPOCH + datetime.timedelta(seconds=self.rounds_run) + self._clock_offset
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward (e.g. past a cluster's failover grace period)."""
        self._clock_offset += datetime.timedelta(seconds=seconds)

    def _put(self, obj: JSON) -> bool:
        """Store an object; bump resourceVersion (and generation) only when it changed."""
        key = key_of(obj)
        old = self._objects.get(key)
        metadata = meta(obj)
        if old is not None:
            for field in _SERVER_METADATA:
                if field in meta(old):
                    metadata[field] = meta(old)[field]
                else:
                    metadata.pop(field, None)
            if obj == old:
                return False
        self._serial += 1
        if old is None:
            metadata["uid"] = str(uuid.uuid5(_UID_NAMESPACE, f"{self._serial}/{key}"))
            metadata["creationTimestamp"] = self.now()
            metadata["generation"] = 1
        elif _spec_of(obj) != _spec_of(old):
            metadata["generation"] = int(meta(old).get("generation", 1)) + 1
        metadata["resourceVersion"] = str(self._serial)
        self._objects[key] = obj
        self._changed.add(key)
        if apiserver.changes_discovery(obj):
            self._discovery = None
        return True

    def _admit(self, obj: JSON) -> JSON:
        """API-server admission: scope, default namespace, XRD structural defaulting."""
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        metadata = meta(obj)
        if self.is_namespaced(api_version, kind):
            metadata.setdefault("namespace", "default")
            if not metadata["namespace"]:
                metadata["namespace"] = "default"
        else:
            metadata.pop("namespace", None)
        if (api_version, kind) == ("v1", "Secret") and isinstance(obj.get("stringData"), dict):
            # The API server folds stringData into data (base64) and never stores it.
            data = obj.setdefault("data", {}) or {}
            for name, value in obj.pop("stringData").items():
                data[name] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data
        if self.catalog.definition_for(api_version, kind) is None:
            return obj
        from modelplane import validation  # noqa: PLC0415 - heavy imports, only when used

        return validation.defaulted(obj, self.catalog)

    def _definition(self, obj: JSON) -> xrd.Definition | None:
        api_version = str(obj.get("apiVersion", ""))
        definition = self.catalog.definition_for(api_version, str(obj.get("kind", "")))
        if definition is None or definition.schema(api_version) is None:
            return None
        return definition

    def _depth(self, key: ObjectKey) -> int:
        depth, obj, seen = 0, self._objects.get(key), set()
        by_uid = None
        while obj is not None and depth < 32:
            owner = _controller_uid(obj)
            if owner is None or owner in seen:
                break
            seen.add(owner)
            if by_uid is None:
                by_uid = {meta(o).get("uid"): o for o in self._objects.values()}
            obj = by_uid.get(owner)
            depth += 1
        return depth


# --- helpers ----------------------------------------------------------------------------------


def format_list(names: Iterable[str]) -> str:
    """Crossplane's list wording: ``a``, ``a, b``, ``a, b, and c``, ``a, b, c, and N more``."""
    items = sorted(names)
    if len(items) <= 2:
        return ", ".join(items)
    if len(items) == 3:
        return f"{items[0]}, {items[1]}, and {items[2]}"
    return f"{items[0]}, {items[1]}, {items[2]}, and {len(items) - 3} more"


def _ready_condition(result: PipelineResult) -> JSON:
    if result.composite_ready == "True":
        return _condition("Ready", "True", "Available")
    if result.composite_ready == "False":
        return _condition("Ready", "False", "Creating")
    unready = [name for name, res in result.resources.items() if res.ready != "True"]
    if unready:
        return _condition(
            "Ready", "False", "Creating", f"Unready resources: {format_list(unready)}"
        )
    return _condition("Ready", "True", "Available")


def _condition(type_: str, status: str, reason: str, message: str = "") -> JSON:
    condition = {"type": type_, "status": status, "reason": reason}
    if message:
        condition["message"] = message
    return condition


def _forbidden_in_terminating(key: ObjectKey) -> str:
    """The API server's answer to a create in a terminating namespace."""
    return (
        f"{describe(key)} is forbidden: unable to create new content in namespace {key[2]} "
        "because it is being terminated"
    )


def _terminating_message(key: ObjectKey, obj: JSON) -> str:
    """The provider's error, as the real plane reported it (the usage is named by the UID)."""
    return (
        "connect failed: cannot track ProviderConfig usage: cannot apply ProviderConfigUsage: "
        f'cannot create object: providerconfigusages.{group_of(key[0])} "{meta(obj).get("uid")}" '
        f"is forbidden: unable to create new content in namespace {key[2]} because it is "
        "being terminated"
    )


def _controller_uid(obj: JSON) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _reference(body: JSON, namespaced_xr: bool) -> JSON:
    ref = {"apiVersion": body["apiVersion"], "kind": body["kind"], "name": meta(body)["name"]}
    if not namespaced_xr and meta(body).get("namespace"):
        ref["namespace"] = meta(body)["namespace"]
    return ref


def _merge_applied(live: JSON, desired: JSON) -> JSON:
    """Desired fields win; maps merge so fields other managers own survive; lists are atomic."""
    out = dict(live)
    for name, value in desired.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = _merge_applied(out[name], value)
        else:
            out[name] = copy.deepcopy(value)
    return out


def _spec_of(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in {"metadata", "status"}}


def _first_line(err: Exception) -> str:
    return " ".join(str(err).split())


# --- validation -------------------------------------------------------------------------------


def default_validator(catalog: xrd.Catalog) -> Validator:
    """``modelplane.validation.validate_object``, minus "no schema" verdicts.

    The simulator cannot know which CRDs a real cluster has installed, so a kind without any
    schema here is accepted rather than rejected.
    """
    from modelplane import validation  # noqa: PLC0415 - heavy imports, only when used

    def validate(obj: JSON, source: str) -> list[str]:
        return [
            str(problem)
            for problem in validation.validate_object(obj, source, catalog)
            if not (not problem.path and problem.message.startswith("no schema for"))
        ]

    return validate
