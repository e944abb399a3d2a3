"""Differential fuzzing of CRD validation rules: the API server against ``modelplane validate``.

A seeded generator makes CustomResourceDefinitions whose schemas carry
``x-kubernetes-validations`` rules, and objects of each (creates, and for transition rules
updates of a stored object). Each case is judged twice:

* by the real kube-apiserver: the CRD is created for real (a refusal is a verdict), and once
  it is Established every object is sent as a dry-run create with ``fieldValidation=Strict``;
  an update first creates the old object for real, then sends the new one as a dry-run update;
* by ``modelplane validate`` in-process: the CRD and the objects as one set of documents
  (``check_documents``), an update through ``validation.validate_update``.

Two verdicts agree when both accept, or both refuse naming the same fields (and, where the
case's rules set a message or messageExpression, with the same messages). Cases fall into
groups (compile, cost, transition, optional, listtype, format, quantity, message); the
agreement is printed per group.

Every CRD gets its own API group (``c<n>.<run>.fuzz.modelplane.test``, new for each run) and
the label ``FUZZ_LABEL``; all of them are deleted afterwards. A run of the default size (547
CRDs, 2,856 objects) takes about half a minute against a kubernetes-only plane on two cores.

    uv run python -m modelplane_realplane.fuzz --run /tmp/fuzz-plane   # a plane already up
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from modelplane import validate as validating
from modelplane import validation
from modelplane.validate import Document

from modelplane_realplane.kubeapi import ApiError, Client, is_true, wait
from modelplane_realplane.paths import REPOSITORY

JSON = dict[str, Any]

SEED = 19
GROUP_DOMAIN = "fuzz.modelplane.test"
FUZZ_LABEL = "modelplane.io/fuzz"
KIND, PLURAL = "Fuzz", "fuzzes"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUPS = ("compile", "cost", "transition", "optional", "listtype", "format", "quantity",
          "message")  # fmt: skip
WORKERS = 4
RANDOM_RULES = 120  # random typed rules (the compile group), besides the templates
# The API server delays a create of a custom resource whose CRD became Established less than
# two seconds ago (customresource_handler.go); waiting once beats waiting in every request.
ESTABLISH_GRACE = 2.1


class _Missing:
    """No value: the field (or the whole spec) is left out."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# --------------------------------------------------------------------------------------------
# Cases


@dataclasses.dataclass(frozen=True)
class Probe:
    """One object to judge: a create of ``spec``, or an update from ``old`` to ``spec``."""

    spec: Any
    old: Any = None  # the stored object's spec for an update (MISSING: stored without one)

    @property
    def is_update(self) -> bool:
        return self.old is not None


@dataclasses.dataclass(frozen=True)
class Case:
    group: str
    label: str  # what the generator made, e.g. "compile:size-of-number/mutated"
    schema: JSON  # the CRD's openAPIV3Schema
    probes: tuple[Probe, ...] = ()
    compare_messages: bool = False  # the rules set messages: compare them too
    # Where the rules report (patterns over field paths): messages are compared there only,
    # schema errors elsewhere keep each side's own wording.
    rule_fields: tuple[str, ...] = ()

    def crd(self, group: str) -> JSON:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{group}", "labels": {FUZZ_LABEL: "true"}},
            "spec": {
                "group": group,
                "scope": "Cluster",
                "names": {
                    "plural": PLURAL,
                    "singular": "fuzz",
                    "kind": KIND,
                    "listKind": f"{KIND}List",
                },
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": self.schema},
                    }
                ],
            },
        }


def group_name(index: int, run: str) -> str:
    """The API group of a run's index-th CRD: unique per run, as a CRD deleted by an earlier
    run may still be finishing its deletion."""
    return f"c{index}.{run}.{GROUP_DOMAIN}"


def run_token() -> str:
    return f"r{int(time.time() * 1000) % 10**9:09d}"


def custom_object(group: str, name: str, spec: Any) -> JSON:
    body: JSON = {
        "apiVersion": f"{group}/v1",
        "kind": KIND,
        "metadata": {"name": name},
    }
    if spec is not MISSING:
        body["spec"] = spec
    return body


# --------------------------------------------------------------------------------------------
# Verdicts


@dataclasses.dataclass(frozen=True)
class Verdict:
    accepted: bool
    causes: tuple[tuple[str, str], ...] = ()  # (field, message), sorted

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(field for field, _ in self.causes)

    def messages(self, fields: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """The normalised messages at the fields matching one of the patterns ``fields``."""
        return tuple(sorted(
            (field, normal_message(message)) for field, message in self.causes
            if any(re.fullmatch(pattern, field) for pattern in fields)
        ))  # fmt: skip

    def show(self) -> str:
        if self.accepted:
            return "accepts"
        return "refuses " + "; ".join(f"{f or '<object>'}: {m[:240]}" for f, m in self.causes)


ACCEPTED = Verdict(True)


def refused(causes: Iterable[tuple[str, str]]) -> Verdict:
    found = sorted({(normal_field(f), m.replace("\n", " ")) for f, m in causes})
    return Verdict(False, tuple(found) or (("", "refused"),))


def normal_field(path: str) -> str:
    """One spelling of a field path: the server's ``spec.a[0].b`` (no leading dot)."""
    path = (path or "").strip()
    return "" if path == "<nil>" else path.lstrip(".")


_SCHEMA_TYPE_VALUE = re.compile(r'^Invalid value: "[a-z-]*": ')


def normal_message(message: str) -> str:
    """A rule's message without the value the server names (the schema type) or the
    ``Invalid value:`` that ``modelplane validate`` leaves out for FieldValueInvalid."""
    message = _SCHEMA_TYPE_VALUE.sub("", message.strip())
    return message.removeprefix("Invalid value: ")


@dataclasses.dataclass(frozen=True)
class Judged:
    group: str
    what: str
    server: Verdict
    modelplane: Verdict
    compare_messages: bool = False
    rule_fields: tuple[str, ...] = ()

    @property
    def agree(self) -> bool:
        if self.server.accepted != self.modelplane.accepted:
            return False
        if self.server.accepted:
            return True
        if self.server.fields != self.modelplane.fields:
            return False
        if not self.compare_messages:
            return True
        fields = self.rule_fields
        return self.server.messages(fields) == self.modelplane.messages(fields)

    def describe(self) -> str:
        return (f"[{self.group}] {self.what}\n    the API server {self.server.show()}\n"
                f"    modelplane validate {self.modelplane.show()}")  # fmt: skip


# --------------------------------------------------------------------------------------------
# The API server's verdicts


_STRICT_FIELD = re.compile(r'(unknown|duplicate) field "([^"]*)"')


def _status_causes(error: ApiError) -> list[tuple[str, str]]:
    details = error.status.get("details") or {}
    causes = [(c.get("field", ""), c.get("message", "")) for c in details.get("causes") or []]
    message = str(error.status.get("message", error))
    if not causes and "strict decoding error" in message:
        # Strict decoding names the fields only in its message: one cause per field.
        causes = [(f, f'{what} field "{f}"') for what, f in _STRICT_FIELD.findall(message)]
    return causes or [("", message)]


def _server_error(error: Exception) -> Verdict:
    if isinstance(error, ApiError):
        return refused(_status_causes(error))
    return refused([("", f"request failed: {error}")])


def _crd_verdicts(client: Client, crds: list[JSON], dry_run: bool = False) -> list[Verdict]:
    query = "?dryRun=All" if dry_run else ""

    def create(crd: JSON) -> Verdict:
        try:
            client.request("POST", CRD_PATH + query, crd)
        except (ApiError, OSError) as error:
            return _server_error(error)
        return ACCEPTED

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(create, crds))


def wait_established(client: Client, names: Iterable[str], timeout: float = 120) -> None:
    """Every named CRD Established, then the API server's grace period for creates."""
    pending = set(names)
    if not pending:
        return
    selector = urllib.parse.quote(f"{FUZZ_LABEL}=true")

    def done() -> bool:
        listing = client.request("GET", f"{CRD_PATH}?labelSelector={selector}")
        for item in listing["items"]:
            if is_true(item, "Established"):
                pending.discard(item["metadata"]["name"])
        return not pending

    wait(f"{len(pending)} fuzz CRDs Established", done, timeout, every=0.1)
    time.sleep(ESTABLISH_GRACE)


def delete_fuzz_crds(client: Client) -> None:
    selector = urllib.parse.quote(f"{FUZZ_LABEL}=true")
    try:
        client.request("DELETE", f"{CRD_PATH}?labelSelector={selector}")
    except (ApiError, OSError) as error:
        print(f"could not delete the fuzz CRDs: {error}", file=sys.stderr)


def _resource_path(group: str, name: str | None = None) -> str:
    path = f"/apis/{group}/v1/{PLURAL}"
    return f"{path}/{name}" if name else path


_DRY_STRICT = "?dryRun=All&fieldValidation=Strict"


def _probe_verdict(client: Client, group: str, number: int, probe: Probe) -> Verdict:
    try:
        if not probe.is_update:
            body = custom_object(group, f"o{number}", probe.spec)
            client.request("POST", _resource_path(group) + _DRY_STRICT, body)
            return ACCEPTED
        name = f"u{number}"
        try:
            stored = client.request("POST", _resource_path(group) + "?fieldValidation=Strict",
                                    custom_object(group, name, probe.old))  # fmt: skip
        except ApiError as error:
            return _old_refused(_status_causes(error))
        body = custom_object(group, name, probe.spec)
        body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
        client.request("PUT", _resource_path(group, name) + _DRY_STRICT, body)
    except (ApiError, OSError) as error:
        return _server_error(error)
    return ACCEPTED


def _old_refused(causes: Iterable[tuple[str, str]]) -> Verdict:
    """The stored object of an update was itself refused: that create is the verdict."""
    return refused((f"(old) {normal_field(f)}", m) for f, m in causes)


def server_verdicts(
    client: Client, cases: list[Case], groups: list[str]
) -> tuple[list[Verdict], list[list[Verdict]]]:
    """The API server's verdict on each CRD, and on each probe of the CRDs it accepted."""
    crds = [case.crd(group) for case, group in zip(cases, groups, strict=True)]
    crd_verdicts = _crd_verdicts(client, crds)
    wait_established(client, (crd["metadata"]["name"] for crd, v in
                               zip(crds, crd_verdicts, strict=True) if v.accepted))  # fmt: skip
    jobs = [(i, n, probe) for i, case in enumerate(cases) if crd_verdicts[i].accepted
            for n, probe in enumerate(case.probes)]  # fmt: skip
    with ThreadPoolExecutor(WORKERS) as pool:
        answers = list(pool.map(lambda job: _probe_verdict(client, groups[job[0]], *job[1:]),
                                jobs))  # fmt: skip
    probe_verdicts: list[list[Verdict]] = [[] for _ in cases]
    for (i, _, _), answer in zip(jobs, answers, strict=True):
        probe_verdicts[i].append(answer)
    return crd_verdicts, probe_verdicts


# --------------------------------------------------------------------------------------------
# modelplane validate's verdicts


def _problem_verdict(problems: list[validation.Problem]) -> Verdict:
    return ACCEPTED if not problems else refused((p.path, p.message) for p in problems)


def modelplane_verdicts(group: str, case: Case) -> tuple[Verdict, list[Verdict]]:
    """``modelplane validate``'s verdict on the CRD, and (if it accepts it) on each probe."""
    source = f"fuzz/{group.split('.', maxsplit=1)[0]}.yaml"
    crd_doc = Document(source, 1, case.crd(group))
    creates = [Document(source, n + 2, custom_object(group, f"o{n}", probe.spec))
               for n, probe in enumerate(case.probes) if not probe.is_update]  # fmt: skip
    results = validating.check_documents([crd_doc, *creates])
    crd_verdict = _problem_verdict(results[0])
    if not crd_verdict.accepted:
        return crd_verdict, []
    created = iter(results[1:])
    catalog = validating.catalog_with([crd_doc])
    verdicts = []
    for n, probe in enumerate(case.probes):
        if not probe.is_update:
            verdicts.append(_problem_verdict(next(created)))
            continue
        old = custom_object(group, f"u{n}", probe.old)
        old_problems = validation.validate_object(old, source, catalog)
        if old_problems:
            verdicts.append(_old_refused((p.path, p.message) for p in old_problems))
            continue
        new = custom_object(group, f"u{n}", probe.spec)
        update = getattr(validation, "validate_update", None)  # absent before issue 19
        problems = (update(old, new, source, catalog) if update is not None
                    else validation.validate_object(new, source, catalog))  # fmt: skip
        verdicts.append(_problem_verdict(problems))
    return crd_verdict, verdicts


# --------------------------------------------------------------------------------------------
# Judging


def _rules_text(schema: Any, path: str = "") -> list[str]:
    """Every rule in a schema, with where it stands, for describing a case."""
    if not isinstance(schema, dict):
        return []
    found = []
    for rule in schema.get("x-kubernetes-validations") or []:
        extras = {k: v for k, v in rule.items() if k != "rule"}
        found.append(f"{path or '<root>'}: {rule.get('rule')!r}" + (f" {extras}" if extras else ""))
    for name, sub in (schema.get("properties") or {}).items():
        found += _rules_text(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        found += _rules_text(schema.get(key), f"{path}.{key}")
    return found


def _short(value: Any, limit: int = 200) -> str:
    text = "MISSING" if value is MISSING else json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge(client: Client, cases: list[Case]) -> list[Judged]:
    """Both verdicts on every CRD and every probe of the CRDs both accept."""
    run = run_token()
    groups = [group_name(index, run) for index in range(len(cases))]
    try:
        crd_verdicts, probe_verdicts = server_verdicts(client, cases, groups)
    finally:
        delete_fuzz_crds(client)
    judged = []
    for index, case in enumerate(cases):
        rules = "; ".join(_rules_text(case.schema)) or "(no rules)"
        mine_crd, mine_probes = modelplane_verdicts(groups[index], case)
        what = f"c{index} {case.label} CRD with {rules}"
        judged.append(Judged(case.group, what, crd_verdicts[index], mine_crd))
        if not (crd_verdicts[index].accepted and mine_crd.accepted):
            continue
        for number, (probe, theirs, mine) in enumerate(
            zip(case.probes, probe_verdicts[index], mine_probes, strict=True)
        ):
            verb = f"update from {_short(probe.old)} to" if probe.is_update else "create"
            judged.append(Judged(
                case.group,
                f"c{index}/{number} {case.label} {verb} {_short(probe.spec)}; rules {rules}",
                theirs, mine, case.compare_messages, case.rule_fields,
            ))  # fmt: skip
    return judged


def agreement(judged: list[Judged]) -> dict[str, tuple[int, int]]:
    """group -> (agreeing, judged), plus "all"."""
    totals: dict[str, list[int]] = {group: [0, 0] for group in GROUPS}
    for j in judged:
        entry = totals.setdefault(j.group, [0, 0])
        entry[0] += j.agree
        entry[1] += 1
    totals["all"] = [sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())]
    return {group: (a, n) for group, (a, n) in totals.items()}


def summary(judged: list[Judged]) -> str:
    lines = []
    for group, (agree, cases) in agreement(judged).items():
        share = f"{100 * agree / cases:.1f} %" if cases else "-"
        lines.append(f"{group:>10}: {agree}/{cases} agree ({share})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Generators: fields, values, rules


def _string(max_length: int | None = None, **extra: Any) -> JSON:
    schema: JSON = {"type": "string", **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


_PORTS_ITEM: JSON = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _string(16), "port": {"type": "integer"}},
}

# name -> (schema, values an object may hold; some break the schema on purpose)
FIELDS: dict[str, tuple[JSON, list[Any]]] = {
    "name": (_string(63), ["web", "my-app", "My_App", "a.b.c", "-x", "", "x" * 64, "abc-"]),
    "text": (_string(), ["hello", "a b", "", "https://example.com/x", "10.0.0.1", "1Gi"]),
    "count": ({"type": "integer"}, [0, 1, 5, -3, 100, 2**40, 1.5]),
    "ratio": ({"type": "number"}, [0.5, 1, 2.5, -1.0, 0]),
    "flag": ({"type": "boolean"}, [True, False, "true"]),
    "tags": ({"type": "array", "maxItems": 8, "items": _string(32)},
             [[], ["a"], ["a", "b"], ["b", "a"], ["a", "a"], ["x" * 40]]),
    "set": ({"type": "array", "maxItems": 8, "x-kubernetes-list-type": "set",
             "items": _string(16)}, [[], ["a"], ["a", "b"], ["b", "a"], ["c"], ["a", "a"]]),
    "set2": ({"type": "array", "maxItems": 8, "x-kubernetes-list-type": "set",
              "items": _string(16)}, [[], ["a"], ["b", "a"], ["a", "b", "c"]]),
    "ports": ({"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["name"], "items": _PORTS_ITEM},
              [[], [{"name": "http", "port": 80}],
               [{"name": "https", "port": 443}, {"name": "http", "port": 80}],
               [{"name": "http", "port": 8080}], [{"name": "http"}, {"name": "http"}],
               [{"port": 1}]]),
    "ports2": ({"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"], "items": _PORTS_ITEM},
               [[{"name": "http", "port": 80}],
                [{"name": "http", "port": 80}, {"name": "https", "port": 443}], []]),
    "labels": ({"type": "object", "maxProperties": 8, "additionalProperties": _string(63)},
               [{}, {"app": "web"}, {"app": "db", "tier": "x"}, {"app": 1}]),
    "when": (_string(format="date-time"),
             ["2024-01-01T00:00:00Z", "2030-06-01T12:00:00+02:00", "yesterday"]),
    "timeout": (_string(format="duration"), ["1h", "30s", "1h30m", "0s", "5d"]),
    "size": ({"x-kubernetes-int-or-string": True}, [1, "50%", 0, "abc", 2.5]),
    "memory": (_string(32), ["1Gi", "512Mi", "500m", "1.5", "abc", "1e3", "2Ki", "-1", "0.1"]),
    "addr": (_string(64), ["10.0.0.1", "::1", "fe80::1", "192.168.0.0/16", "not-ip",
                           "::ffff:1.2.3.4", "010.0.0.1", "10.0.0.0/8", "2001:db8::/32",
                           "10.0.0.1/8"]),
    "url": (_string(128), ["https://example.com:8080/x?y=1", "/path", "example.com",
                           "http://[::1]/", "mailto:a@b", "%zz", "https://a b/"]),
    "version": (_string(32), ["1.2.3", "v1.2.3", "1.0", "1.0.0-alpha+b", "01.2.3"]),
    "nested": ({"type": "object", "properties": {"a": _string(16), "b": {"type": "integer"}}},
               [{}, {"a": "x"}, {"a": "x", "b": 2}, {"b": -1}, {"a": "bad"}]),
    "holder": ({"type": "object", "properties": {"s": {
                    "type": "array", "maxItems": 4, "x-kubernetes-list-type": "set",
                    "items": _string(8)}}},
               [{"s": ["a", "b"]}, {"s": ["b", "a"]}, {}]),
    "holder2": ({"type": "object", "properties": {"s": {
                     "type": "array", "maxItems": 4, "x-kubernetes-list-type": "set",
                     "items": _string(8)}}},
                [{"s": ["a", "b"]}, {"s": ["b"]}]),
}  # fmt: skip

_FIELD_REF = re.compile(r"\bself\.([a-z][a-z0-9]*)")


@dataclasses.dataclass(frozen=True)
class Template:
    """A rule (or rules) and where they stand: ``at`` is a field name, ``field.items``,
    ``field.values`` (a map's values) or "" for spec itself. ``fields`` the spec declares;
    the ones the rule text names are added."""

    rules: tuple[JSON, ...]
    at: str = ""
    fields: tuple[str, ...] = ()
    updates: bool = False  # judge updates too (transition rules)


def _t(rule: str, at: str = "", fields: tuple[str, ...] = (), **extra: Any) -> Template:
    return Template(({"rule": rule, **extra},), at, fields)


def _tu(rule: str, at: str = "", fields: tuple[str, ...] = (), **extra: Any) -> Template:
    return dataclasses.replace(_t(rule, at, fields, **extra), updates=True)


# Rules over spec (self is spec) unless ``at`` says otherwise.
TEMPLATES: dict[str, list[Template]] = {
    "compile": [
        _t("size(self.count) > 0"),
        _t("self.count.size() > 0"),
        _t("self.name.size() <= 63"),
        _t("self.name.matches('[')"),
        _t("self.name.matches('^[a-z]+$')"),
        _t("self.name.matches('a{1001}')"),
        _t("self.tags.all(t, t.matches('[a-'))"),
        _t("self.name.find('(') == ''"),
        _t("duration('1x') < duration('1h')"),
        _t("self.timeout > duration('1h')"),
        _t("self.timeout < duration('5d')"),
        _t("self.when < timestamp('2020-13-01T00:00:00Z')"),
        _t("timestamp('2024-01-01') < self.when"),
        _t("timestamp('2020-01-01T00:00:00Z') < self.when"),
        _t("self.name != null"),
        _t("self.nested != null"),
        _t("self.count != null"),
        _t("self.size != null"),
        _t("self.nope == 1", fields=("name",)),
        _t("frob(self.name)"),
        _t("self.name.startsWith(1)"),
        _t("self.count + 'a' == 'b'"),
        _t("self.count == 1.0"),
        _t("self.ratio == 1"),
        _t("self.ratio == 1.0"),
        _t("self.count < 1.5"),
        _t("self.tags.exists(t, t == 1)"),
        _t("self.tags.all(t, t.size() < 10)"),
        _t("self.labels.all(k, self.labels[k] != '')"),
        _t("has(self.nested.a)"),
        _t("has(self.nested)"),
        _t("has(self.labels.app)"),
        _t("has(self.name.x)"),
        _t("has(self.tags[0])"),
        _t("self.size > 0"),
        _t("self.count"),
        _t("self.name.lowerAscii() == self.name"),
        _t("self.name.reverse() == self.name"),
        _t("[1, 'a'].size() == 2"),
        _t("self.tags.distinct().size() == self.tags.size()"),
        _t("self.tags.sort() == self.tags"),
        _t("self.tags.slice(0, 1) == self.tags"),
        _t("cel.bind(n, self.name, n == n)"),
        _t("oldSelf.name == self.name", optionalOldSelf=True),
        _t("oldSelf.hasValue()"),
        _t("self.name.matches(self.text)"),
        _t("self.name in ['a', 'b']"),
        _t("self.labels.exists(k, v, v == 'x')"),
        _t("self.tags.transformList(i, t, t + 'x').size() > 0"),
        _t("self.name.charAt(0) == 'a'"),
        _t("'%s'.format([self.name]) != ''"),
        _t("'%d'.format([self.name]) != ''"),
        _t("self.flag == 'true'"),
        _t("self.tags[0] == 1"),
        _t("self.labels['app'] == 1"),
        _t("self.nested.a + 1 == 'x'"),
        _t("self.nested.c == 1"),
        _t("self.ratio + self.count > 0.0"),
        _t("int(self.ratio) + self.count > 0"),
        _t("quantity(self.memory) == 1"),
        _t("self.when.getFullYear() > 2000"),
        _t("self.timeout.getSeconds() > 0"),
        _t("self.name.split('-').size() > 1"),
        _t("self.name == self.count"),
        _t("!self.flag || self.count > 0"),
        _t("self.name.matches('(?i)abc')"),
        _t("self.?name.orValue('') == ''"),
        _t("self.?nope.orValue('') == ''", fields=("name",)),
        _t("self.name.indexOf('a') >= 0 && self.tags.indexOf('a') >= -1"),
        _t("self.tags.indexOf(1) >= 0"),
        _t("self.tags.isSorted() && self.tags.min() != ''"),
        _t("self.count.all(x, x > 0)"),
        _t("self.labels.size() < 3 && self.labels.app != ''"),
        _t("self.name.upperAscii().lowerAscii().trim() != ''"),
        _t("self.ports.all(p, p.port > 0)"),
        _t("self.ports.all(p, p.protocol == 'TCP')"),
        _t("self.metadata.name != ''", at="<root>"),
        _t("self.metadata.labels.size() > 0", at="<root>"),
        _t("self.kind == 'Fuzz' && self.apiVersion.startsWith('c')", at="<root>"),
        _t("self.spec.name != 'x'", at="<root>", fields=("name",)),
        _t("self.matches('^a')", at="name"),
        _t("self > 0", at="count"),
        _t("self.size() < 3", at="tags"),
        _t("self.all(k, k.size() < 10)", at="labels"),
        _t("type(self) == string ? self.endsWith('%') : self >= 0", at="size"),
        _t("self.startsWith('a')", at="tags.items"),
        _t("self.port > 0", at="ports.items"),
        _t("self.size() > 0", at="labels.values"),
        _t("dyn(self.count) == 1.0"),
        _t("self.count in [1, 2.0]"),
        _t("[self.count, self.ratio].size() == 2"),
        _t("{'a': self.name, 'b': self.count}.size() == 2"),
        _t("self.tags + self.name == []"),
        _t("self.name.size() > 0", message="has\nbreak"),
        _t("self.name.size() > 0", reason="Bogus"),
        _t("self.name.size() > 0", fieldPath=".nope", fields=("name",)),
        _t("self.name.size() > 0", fieldPath=".name"),
        _t("self.name.size() > 0", messageExpression="self.count"),
        _t("self.name.size() > 0", messageExpression="self.nope", fields=("name",)),
        _t("self.name.size() > 0", optionalOldSelf=True),
    ],
    "cost": [],  # generated by _cost_cases
    "transition": [
        _tu("self == oldSelf", at="name", message="name is immutable"),
        _tu("self >= oldSelf", at="count"),
        _tu("self.size() >= oldSelf.size()", at="tags"),
        _tu("self == oldSelf", at="tags.items"),
        _tu("self == oldSelf", at="set.items"),
        _tu("self.port == oldSelf.port", at="ports.items"),
        _tu("self == oldSelf", at="labels.values"),
        _tu("!has(oldSelf.name) || has(self.name)"),
        _tu("oldSelf.name == self.name"),
        _tu("self.count >= oldSelf.count", fields=("count",)),
        _tu("!oldSelf.hasValue() || self == oldSelf.value()", at="name", optionalOldSelf=True),
        _tu("oldSelf.orValue('') != 'my-app'", at="name", optionalOldSelf=True),
        _tu("oldSelf.hasValue()", at="name", optionalOldSelf=True),
        _tu("!oldSelf.hasValue()", at="name", optionalOldSelf=True),
        _tu("self.size() > 0", at="name", optionalOldSelf=True),
        _tu("self == oldSelf", at="name", optionalOldSelf=False),
        _tu("oldSelf.?a.orValue('') == '' || self.a == oldSelf.a", at="nested"),
        _tu("self.a == oldSelf.a", at="nested"),
        _tu("oldSelf.all(k, k in self)", at="labels"),
        _tu("self.set == oldSelf.set", fields=("set",)),
        _tu("self.ports == oldSelf.ports", fields=("ports",)),
        _tu("self == oldSelf", at="holder.s"),
        _tu("self.size() >= oldSelf.size()", at="set"),
        _tu("oldSelf == 'x' || self != 'x'", at="name", message="cannot become x"),
        _tu("self.when >= oldSelf.when", fields=("when",)),
        _tu(
            "oldSelf.count == self.count",
            messageExpression="'count was ' + string(oldSelf.count)",
            fields=("count",),
        ),
    ],
    "optional": [
        _t("self.?nested.?a.orValue('none') != 'bad'"),
        _t("has(self.nested) && has(self.nested.a) ? self.nested.a != '' : true"),
        _t("self.?labels[?'app'].orValue('') != 'db'"),
        _t("self.?tags[?0].orValue('') != 'b'"),
        _t("self.tags[?1].orValue('') != 'b'"),
        _t("optional.of(self.name).hasValue()"),
        _t("has(self.nested.b) || true"),
        _t("self.?count.orValue(0) < 10"),
        _t("self.?nested.orValue({}).size() >= 0", fields=("nested",)),
        _t("self.nested.?a.or(optional.of('d')).value() != 'bad'"),
        _t("[?self.?name, ?self.?text].size() >= 1"),
        _t("{?'a': self.?name}.size() == 1"),
        _t("self.?name.optMap(n, n.size()).orValue(0) < 60"),
        _t("has(self.labels.app)"),
        _t("self.labels.?app.orValue('') != 'db'"),
        _t("self.nested.a == 'x'"),
        _t("self.nested.b > 0"),
        _t("self.labels.app == 'web'"),
        _t("self.labels['tier'] != 'x'"),
        _t("self.?nested.?b.hasValue() == has(self.nested.b)"),
        _t("self.?ports[?0].?port.orValue(0) != 443"),
        _t("self.ports.exists(p, p.name == 'http' && p.?port.orValue(0) == 80)"),
        _t("optional.none().orValue(self.count) == self.count"),
        _t("self.?name.value().size() > 0"),
        _t("self.?nested.a.orValue('') == ''"),
        _t("self.nested.?b.orValue(0) >= 0 && self.nested.?c.orValue(0) == 0"),
        _t("optional.ofNonZeroValue(self.name).hasValue()"),
        _t("self.?labels.orValue({'app': 'x'})['app'] != 'db'"),
        _t("has(self.size) && type(self.size) == int"),
        _t("self.?size.orValue(0) != 0"),
    ],
    "listtype": [
        _t("self.set == ['b', 'a']"),
        _t("['b', 'a'] == self.set"),
        _t("self.set != ['a', 'b']"),
        _t("self.set + ['c'] == ['a', 'b', 'c']"),
        _t("(self.set + ['a', 'c']).size() <= 2"),
        _t("(self.set + self.set2).size() <= 2"),
        _t("self.set + self.set2 == self.set2 + self.set"),
        _t("self.set == self.set2"),
        _t("self.tags == self.set"),
        _t("self.set == self.tags"),
        _t("self.tags + ['a'] == ['a', 'a']"),
        _t("self.ports == self.ports2"),
        _t("self.ports2 == self.ports"),
        _t("(self.ports + self.ports2).size() <= 2"),
        _t("(self.ports + self.ports2).map(p, p.port).sum() < 500"),
        _t("self.ports + [{'name': 'http', 'port': 1}] != self.ports"),
        _t("self.holder == self.holder2"),
        _t("self.holder.s == ['b', 'a']"),
        _t("self.set.all(x, x in self.tags)"),
        _t("sets.equivalent(self.set, self.tags)"),
        _t("sets.contains(self.set, ['a'])"),
        _t("self.set.indexOf('b') == 1"),
        _t("self.set[0] == 'a'"),
        _t("self.set.exists_one(x, x == 'a')"),
        _t("self.set.map(x, x + '!') == ['a!', 'b!']"),
        _t("self.set.filter(x, x != 'c') == ['b', 'a']"),
        _t("self == ['a', 'b']", at="set"),
        _t("['a', 'b'] == self", at="set"),
        _t("self + ['z'] == ['z'] + self", at="set"),
        _t("self.size() == self.filter(x, true).size()", at="set"),
        _t("[self.set] == [['b', 'a']]"),
        _t("self.?set.orValue([]) == ['b', 'a']"),
        _t("(self.count > 0 ? self.set : self.set2) == ['b', 'a']"),
        _t("self.set.sum() == ''"),
        _t("self.ports.all(p, self.ports2.exists(q, q == p))"),
    ],
    "format": [
        _t("!format.dns1123Label().validate(self.name).hasValue()"),
        _t("format.dns1123Subdomain().validate(self.name) == optional.none()"),
        _t("format.named('dns1035Label').value().validate(self.name).orValue([]).size() == 0"),
        _t("!format.labelValue().validate(self.name).hasValue()"),
        _t("!format.qualifiedName().validate(self.name).hasValue()"),
        _t("!format.dns1123LabelPrefix().validate(self.name).hasValue()"),
        _t("!format.uuid().validate(self.text).hasValue()"),
        _t("!format.uri().validate(self.url).hasValue()"),
        _t("!format.byte().validate(self.text).hasValue()"),
        _t("!format.date().validate(self.text).hasValue()"),
        _t("!format.datetime().validate(self.text).hasValue()"),
        _t("format.named(self.name).hasValue()"),
        _t("format.dns1123Label().validate(self.name)"),
        _t("format.dns1123Label().validate(self.name).size() == 0"),
        _t("format.nope().validate(self.name).hasValue()"),
        _t(
            "!format.dns1123Label().validate(self.name).hasValue()",
            messageExpression="format.dns1123Label().validate(self.name).value().join('; ')",
        ),
        _t("isURL(self.url)"),
        _t("!isURL(self.url) || url(self.url).getScheme() == 'https'"),
        _t("url(self.url).getHost() != ''"),
        _t("url(self.url).getPort() == '' || int(url(self.url).getPort()) > 1024"),
        _t("isURL(self.url) && url(self.url).getQuery().size() == 0"),
        _t("isURL(self.url) && url(self.url).getEscapedPath().startsWith('/')"),
        _t("isURL(self.url) && url(self.url).getHostname() != 'example.com'"),
        _t("isIP(self.addr)"),
        _t("ip(self.addr).family() == 4"),
        _t("isIP(self.addr) && ip.isCanonical(self.addr)"),
        _t("!isIP(self.addr) || !ip(self.addr).isLoopback()"),
        _t("!isIP(self.addr) || ip(self.addr).isGlobalUnicast()"),
        _t("!isIP(self.addr) || !ip(self.addr).isLinkLocalUnicast()"),
        _t("isCIDR(self.addr)"),
        _t("isCIDR(self.addr) && cidr(self.addr).containsIP('10.0.0.1')"),
        _t("!isCIDR(self.addr) || cidr(self.addr).prefixLength() >= 16"),
        _t("!isCIDR(self.addr) || cidr(self.addr) == cidr(self.addr).masked()"),
        _t("!isCIDR(self.addr) || cidr(self.addr).ip().family() == 4"),
        _t("cidr('10.0.0.0/8').containsCIDR(self.addr)"),
        _t("string(ip(self.addr)) == self.addr"),
        _t("ip(self.addr) == ip('::1')"),
        _t("isSemver(self.version)"),
        _t("isSemver(self.version, true) && semver(self.version, true).major() >= 1"),
        _t("semver(self.version).isLessThan(semver('2.0.0'))"),
        _t("self.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"),
        _t("self.name.find('[0-9]+') == ''"),
        _t("self.name.findAll('[a-z]').size() < 5"),
        _t("self.text.findAll('[a-z]+', 1).size() <= 1"),
    ],
    "quantity": [
        _t("isQuantity(self.memory)"),
        _t("quantity(self.memory).isLessThan(quantity('1Gi'))"),
        _t("quantity(self.memory).compareTo(quantity('512Mi')) <= 0"),
        _t("quantity(self.memory).isInteger()"),
        _t("quantity(self.memory).asInteger() < 2000000000"),
        _t("quantity(self.memory).asApproximateFloat() < 1e9"),
        _t("quantity(self.memory).add(quantity('1')).isGreaterThan(quantity('1'))"),
        _t("quantity(self.memory).sub(1).sign() >= 0"),
        _t("quantity(self.memory) == quantity('1Gi')"),
        _t("quantity(self.memory) != quantity('1024Mi')"),
        _t("quantity(self.memory) < quantity('1Gi')"),
        _t("isQuantity(self.memory) && quantity(self.memory).isGreaterThan(quantity('0'))"),
        _t("!isQuantity(self.memory) || quantity(self.memory).sign() == 1"),
        _t("quantity(self.memory).add(2).asInteger() > 0"),
        _t("quantity(self.memory).isGreaterThan(1)"),
        _t("quantity(self.memory).asInteger() == 1"),
        _t("type(self.size) == string ? isQuantity(self.size) : self.size >= 0"),
        _t("isQuantity(string(self.size))"),
        _t("quantity(self.memory).compareTo(quantity(self.text)) == 0"),
        _t("quantity(self.memory).asApproximateFloat() == double(self.count)"),
        _t(
            "quantity(self.memory).isInteger() == (quantity(self.memory).asApproximateFloat()"
            " == double(int(quantity(self.memory).asApproximateFloat())))"
        ),
    ],
    "message": [
        _t("self.name.size() < 5", message="name too long"),
        _t("self.name.size() < 5", message="  padded message  "),
        _t("self.name.size() < 5", messageExpression="'name ' + self.name + ' is too long'"),
        _t("self.count < 10", messageExpression="string(self.count) + ' is more than 10'"),
        _t(
            "self.count < 10",
            message="fallback",
            messageExpression="self.nested.a + ' bad'",
            fields=("nested",),
        ),
        _t("self.count < 10", message="fallback", messageExpression="''"),
        _t("self.count < 10", message="fallback", messageExpression="'a\\nb'"),
        _t("self.count < 10", message="fallback", messageExpression="'  trimmed  '"),
        _t("self.count < 10", messageExpression="'x'.repeat(3)"),
        _t("self.count < 10", message="Forbidden count", reason="FieldValueForbidden"),
        _t("self.count < 10", message="Required count", reason="FieldValueRequired"),
        _t("self.count < 10", message="dup count", reason="FieldValueDuplicate"),
        _t("self.count < 10", message="bad count", reason="FieldValueInvalid"),
        _t("self.count < 10", message="count at field", fieldPath=".count"),
        _t("self.nested.a != 'bad'", message="nested at field", fieldPath=".nested.a"),
        _t("self.labels.app != 'db'", message="label at field", fieldPath=".labels"),
        _t("self.labels['app'] != 'db'", message="map key path", fieldPath=".labels['app']"),
        _t("self.ports.all(p, p.port < 1000)", message="port", fieldPath=".ports"),
        _t("self.nested.a == 'x'", message="needs nested.a"),
        _t("self.nested.a == 'x'"),
        _t("self.count < 10", messageExpression="'count: %d'.format([self.count])"),
        _t("self.count < 10", messageExpression="self.name"),
        _t("self.count < 10", messageExpression="'x' + 1"),
        _t("self.count < 10", message="has\nline break"),
        _t("self.count < 10", message=""),
        _t("self.count < 10", messageExpression="  "),
        _t(
            "self.name.size() < 5",
            message="items",
            messageExpression="self.tags.join(',') + ' / ' + self.name",
        ),
        _t("self.startsWith('a')", at="tags.items", message="tag must start with a"),
        _t(
            "self.startsWith('a')",
            at="tags.items",
            messageExpression="'tag ' + self + ' must start with a'",
        ),
        _t("self.port < 1000", at="ports.items", messageExpression="'port ' + string(self.port)"),
        _t("self != 'db'", at="labels.values", message="no db"),
        _t("self.size() < 3", at="name", message="short", reason="FieldValueForbidden"),
        _t(
            "self.name.size() < 5 && self.count < 10",
            messageExpression="self.name.size() >= 5 ? 'name' : 'count'",
        ),
        _t("self.count < 10", messageExpression="string(self.count / 0)", message="div"),
    ],
}


def _place(spec: JSON, at: str, rules: list[JSON]) -> JSON:
    """``spec`` (copied) with ``rules`` added at ``at``."""
    spec = copy.deepcopy(spec)
    if at == "":
        node = spec
    else:
        name, _, part = at.partition(".")
        node = spec["properties"][name]
        if part == "items":
            node = node["items"]
        elif part == "values":
            node = node["additionalProperties"]
        elif part:
            node = node["properties"][part]
    node.setdefault("x-kubernetes-validations", []).extend(rules)
    return spec


def _spec_schema(fields: Iterable[str]) -> JSON:
    return {"type": "object",
            "properties": {name: copy.deepcopy(FIELDS[name][0]) for name in fields}}  # fmt: skip


def _root(spec: JSON, root_rules: list[JSON] | None = None) -> JSON:
    root: JSON = {"type": "object", "properties": {"spec": spec}}
    if root_rules:
        root["x-kubernetes-validations"] = root_rules
    return root


def _fields_of(template: Template) -> list[str]:
    names: list[str] = list(template.fields)
    head = template.at.split(".")[0]
    if head and head != "<root>":
        names.append(head)
    for rule in template.rules:
        for text in (rule.get("rule"), rule.get("messageExpression")):
            if isinstance(text, str):
                names += [n for n in _FIELD_REF.findall(text) if n in FIELDS]
    return list(dict.fromkeys(names))


def _value(rng: random.Random, name: str) -> Any:
    return copy.deepcopy(rng.choice(FIELDS[name][1]))


def _spec_value(rng: random.Random, fields: list[str], present: float = 0.85) -> JSON:
    value = {name: _value(rng, name) for name in fields if rng.random() < present}
    if rng.random() < 0.04:  # a field the schema does not declare: strict decoding refuses it
        value["undeclared"] = 1
    return value


def _changed(rng: random.Random, old: JSON, fields: list[str]) -> JSON:
    """``old`` with one or two fields given another value or dropped (sometimes none)."""
    new = copy.deepcopy(old)
    if rng.random() < 0.2:
        return new
    for name in rng.sample(fields, min(len(fields), rng.choice((1, 2)))):
        if rng.random() < 0.15:
            new.pop(name, None)
        else:
            new[name] = _value(rng, name)
    return new


def _swap_field(rule: str, rng: random.Random) -> str | None:
    names = _FIELD_REF.findall(rule)
    if not names:
        return None
    victim = rng.choice(names)
    return rule.replace(f"self.{victim}", f"self.{victim}x", 1)


# Mutations of a rule's text: each makes a plausible mistake.
_MUTATIONS: list[tuple[str, Callable[[str, random.Random], str | None]]] = [
    ("undeclared-field", _swap_field),
    ("misspelled-call", lambda r, g: re.sub(r"\.([a-z])([A-Za-z]+)\(",
                                            lambda m: f".{m.group(1)}{m.group(2)}s(", r, count=1)
                                     if re.search(r"\.[a-z][A-Za-z]+\(", r) else None),
    ("unbalanced", lambda r, g: r[:-1] if r.endswith(")") else r + ")"),
    ("string-literal-as-int", lambda r, g: re.sub(r"'[^']*'", "7", r, count=1)
                                           if "'" in r else None),
    ("int-literal-as-string", lambda r, g: re.sub(r"\b\d+\b", "'7'", r, count=1)
                                           if re.search(r"\b\d+\b", r) else None),
    ("negated", lambda r, g: f"!({r})"),
    ("non-bool", lambda r, g: f"({r}) ? 1 : 0"),
    ("operator", lambda r, g: r.replace("==", "<", 1) if "==" in r else
                              r.replace("<", "==", 1) if "<" in r else None),
    ("double-literal", lambda r, g: re.sub(r"\b(\d+)\b(?!\.)", r"\1.0", r, count=1)
                                    if re.search(r"\b\d+\b", r) else None),
    ("oldSelf", lambda r, g: r.replace("self.", "oldSelf.", 1) if "self." in r else None),
    ("has-of-call", lambda r, g: f"has(self.{_FIELD_REF.findall(r)[0]}.size()) || {r}"
                                 if _FIELD_REF.search(r) else None),
]  # fmt: skip


def _mutated(rng: random.Random, template: Template) -> tuple[Template, str] | None:
    name, mutate = rng.choice(_MUTATIONS)
    rule = dict(template.rules[0])
    text = mutate(rule["rule"], rng)
    if text is None or text == rule["rule"]:
        return None
    rule["rule"] = text
    # Keep the fields the template declares even when the mutation renames one.
    fields = tuple(dict.fromkeys([*template.fields, *_fields_of(template)]))
    return dataclasses.replace(template, rules=(rule, *template.rules[1:]), fields=fields), name


def _template_case(rng: random.Random, group: str, label: str, template: Template,
                   counts: tuple[int, int]) -> Case:  # fmt: skip
    creates, updates = counts
    fields = _fields_of(template)
    extra = [n for n in FIELDS if n not in fields]
    fields += rng.sample(extra, rng.choice((0, 1, 2)))
    spec = _spec_schema(fields)
    root_rules = None
    if template.at == "<root>":
        root_rules = list(template.rules)
    else:
        spec = _place(spec, template.at, list(template.rules))
    probes = [Probe(_spec_value(rng, fields)) for _ in range(creates)]
    if rng.random() < 0.1:
        probes.append(Probe(MISSING))
    if template.updates:
        for _ in range(updates):
            old = _spec_value(rng, fields, present=0.9)
            probes.append(Probe(_changed(rng, old, fields), old=old))
    messages = any("message" in r or "messageExpression" in r for r in template.rules)
    return Case(group, label, _root(spec, root_rules), tuple(probes), compare_messages=messages,
                rule_fields=_rule_fields(template))  # fmt: skip


def _rule_fields(template: Template) -> tuple[str, ...]:
    """Patterns of the field paths a template's rules report at (a fieldPath included)."""
    if template.at == "<root>":
        return ("",)
    name, _, part = template.at.partition(".")
    literal = f"spec.{name}" if name else "spec"
    suffix = {"items": r"\[[0-9]+\]", "values": r"\[[^\]]+\]", "": ""}
    pattern = re.escape(literal) + suffix.get(part, re.escape(f".{part}"))
    patterns = [pattern]
    for rule in template.rules:
        if isinstance(path := rule.get("fieldPath"), str) and part == "":
            relative = re.sub(r"\['([^']*)'\]", r"[\1]", path).lstrip(".")
            patterns.append(re.escape(f"{literal}.{relative}"))
    return tuple(patterns)


def _template_cases(rng: random.Random, group: str, mutations: float) -> list[Case]:
    cases = []
    for number, template in enumerate(TEMPLATES[group]):
        label = f"{group}:{number}"
        cases.append(_template_case(rng, group, label, template, (6, 6)))
        if rng.random() < mutations and (found := _mutated(rng, template)) is not None:
            mutated, how = found
            cases.append(_template_case(rng, group, f"{label}/{how}", mutated, (3, 3)))
    return cases


# --------------------------------------------------------------------------------------------
# Cost: rules near and over the per-expression and per-CRD budgets


_COST_RULES_ON_LIST = [
    "self.all(x, x.contains('abc'))",
    "self.all(x, x.matches('^[a-z]+$'))",
    "self.all(x, self.exists(y, y == x))",
    "self.map(x, x.lowerAscii()).size() > 0",
    "self.join(',').size() > 0",
    "self.all(x, x.size() < 100)",
    "self.exists_one(x, x.startsWith('a'))",
    "self.filter(x, x.endsWith('z')).all(y, y.contains('q'))",
]
_COST_RULES_ON_ITEM = [
    "self.matches('^[a-z]+$')",
    "self.startsWith('a')",
    "self.contains('abc') || self.contains('xyz')",
    "self.split(',').all(p, p.size() > 1)",
]
_COST_MAX_ITEMS = [None, 10, 100, 1000, 3000, 10000, 100000]
_COST_MAX_LENGTH = [None, 8, 64, 256, 1024, 4096]


def _cost_list_case(rng: random.Random, number: int) -> Case:
    items: JSON = {"type": "string"}
    max_length = rng.choice(_COST_MAX_LENGTH)
    if max_length is not None:
        items["maxLength"] = max_length
    listing: JSON = {"type": "array", "items": items}
    max_items = rng.choice(_COST_MAX_ITEMS)
    if max_items is not None:
        listing["maxItems"] = max_items
    if rng.random() < 0.6:
        listing["x-kubernetes-validations"] = [{"rule": rng.choice(_COST_RULES_ON_LIST)}]
        if rng.random() < 0.25:
            listing["x-kubernetes-validations"][0]["messageExpression"] = "self.join(', ')"
    else:
        items["x-kubernetes-validations"] = [{"rule": rng.choice(_COST_RULES_ON_ITEM)}]
    spec: JSON = {"type": "object", "properties": {"names": listing}}
    if rng.random() < 0.3:  # nested: a list of objects holding the list
        outer_max = rng.choice(_COST_MAX_ITEMS[:4])
        outer: JSON = {"type": "array", "items": {"type": "object",
                                                  "properties": {"names": listing}}}  # fmt: skip
        if outer_max is not None:
            outer["maxItems"] = outer_max
        spec = {"type": "object", "properties": {"groups": outer}}
        value = {"groups": [{"names": ["abc"]}]}
    else:
        value = {"names": ["abc", "xyz"]}
    label = f"cost:list/{number} maxItems={max_items} maxLength={max_length}"
    return Case("cost", label, _root(spec), (Probe(value), Probe({})))


def _cost_total_case(rng: random.Random, number: int) -> Case:
    """Many rules, each within its budget, together near the per-CRD total."""
    copies = rng.choice((5, 9, 11, 14, 20))
    max_items = rng.choice((100, 1000, 3000))
    max_length = rng.choice((64, 256, 1024))
    properties = {}
    for index in range(copies):
        properties[f"l{index}"] = {
            "type": "array", "maxItems": max_items,
            "items": {"type": "string", "maxLength": max_length},
            "x-kubernetes-validations": [{"rule": "self.all(x, x.matches('^[a-z]+$'))"}],
        }  # fmt: skip
    label = f"cost:total/{number} {copies} lists maxItems={max_items} maxLength={max_length}"
    spec = {"type": "object", "properties": properties}
    return Case("cost", label, _root(spec), (Probe({"l0": ["abc"]}),))


def _xrd_schemas() -> list[tuple[str, JSON]]:
    """The openAPIV3Schema of every XRD in apis/ (accepted by real API servers)."""
    found = []
    for path in sorted((REPOSITORY / "apis").glob("*/definition.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            for version in doc.get("spec", {}).get("versions", []):
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if isinstance(schema, dict):
                    found.append((f"{path.parent.name}/{version['name']}", schema))
    return found


def _nodes(schema: JSON, path: str = "") -> Iterable[tuple[str, JSON]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _nodes(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}.{key}")


def _xrd_case(rng: random.Random, name: str, schema: JSON, mutate: bool) -> Case:
    """An XRD's schema as a CRD; mutated: bounds dropped and a costly rule added."""
    schema = copy.deepcopy(schema)
    label = f"cost:xrd {name}"
    if mutate:
        nodes = list(_nodes(schema))
        bounded = [(p, n) for p, n in nodes if "maxItems" in n or "maxLength" in n]
        for path, node in rng.sample(bounded, min(len(bounded), rng.choice((1, 2, 4)))):
            node.pop(rng.choice([k for k in ("maxItems", "maxLength") if k in node]))
            label += f" -max@{path}"
        lists = [(p, n) for p, n in nodes if n.get("type") == "array"
                 and (n.get("items") or {}).get("type") == "string"]  # fmt: skip
        if lists:
            path, node = rng.choice(lists)
            rule = rng.choice(_COST_RULES_ON_LIST)
            node.setdefault("x-kubernetes-validations", []).append({"rule": rule})
            label += f" +rule@{path}"
    return Case("cost", label, schema, (Probe({}),))


def _cost_cases(rng: random.Random, lists: int = 40, totals: int = 6) -> list[Case]:
    cases = [_cost_list_case(rng, n) for n in range(lists)]
    cases += [_cost_total_case(rng, n) for n in range(totals)]
    for name, schema in _xrd_schemas():
        cases.append(_xrd_case(rng, name, schema, mutate=False))
        cases.append(_xrd_case(rng, name, schema, mutate=True))
    return cases


# --------------------------------------------------------------------------------------------
# Random rules: typed expressions over the fields, now and then of the wrong type


class _Expressions:
    """Random CEL expressions of a wanted type over the spec's fields (``self`` is spec).
    ``wrong`` is how often a sub-expression of another type is used instead."""

    def __init__(self, rng: random.Random, wrong: float = 0.06) -> None:
        self.rng = rng
        self.wrong = wrong
        self.fields: set[str] = set()
        self.variables: list[tuple[str, str]] = []  # comprehension variables: (name, type)

    def field(self, name: str) -> str:
        self.fields.add(name)
        return f"self.{name}"

    def pick(self, options: list[Callable[[int], str]], depth: int) -> str:
        return self.rng.choice(options)(depth)

    def of(self, kind: str, depth: int = 2) -> str:
        if depth > 0 and self.rng.random() < self.wrong:
            kind = self.rng.choice([k for k in _KINDS if k != kind])
        bound = [name for name, k in self.variables if k == kind]
        if bound and self.rng.random() < 0.4:
            return self.rng.choice(bound)
        return getattr(self, f"_{kind}")(max(depth - 1, 0) if depth else 0)

    def _bool(self, d: int) -> str:
        leaf = [
            lambda d: f"has({self.field(self.rng.choice(['name', 'count', 'tags', 'nested']))})",
            lambda d: self.field("flag"),
            lambda d: self.rng.choice(["true", "false"]),
        ]
        if d == 0:
            return self.pick(leaf, d)
        return self.pick([
            *leaf,
            lambda d: f"{self.of('int', d)} {self.rng.choice(['<', '<=', '==', '!=', '>'])} "
                      f"{self.of('int', d)}",
            lambda d: f"{self.of('string', d)} {self.rng.choice(['==', '!=', '<'])} "
                      f"{self.of('string', d)}",
            lambda d: f"{self.of('double', d)} > {self.of('int', d)}",
            lambda d: f"!({self.of('bool', d)})",
            lambda d: f"{self.of('bool', d)} && {self.of('bool', d)}",
            lambda d: f"({self.of('bool', d)} || {self.of('bool', d)})",
            lambda d: f"{self.of('string', d)}.startsWith({self.of('string', 0)})",
            lambda d: f"{self.of('string', d)}.contains({self.of('string', 0)})",
            lambda d: f"{self.of('string', d)}.matches('{self.rng.choice(_REGEXES)}')",
            lambda d: f"{self.of('string', d)} in {self.of('list', d)}",
            lambda d: self._loop("all", d),
            lambda d: self._loop("exists", d),
            lambda d: self._loop("exists_one", d),
            lambda d: f"{self.of('list', d)}.isSorted()",
            lambda d: f"isQuantity({self.of('string', d)})",
            lambda d: f"!format.dns1123Label().validate({self.of('string', d)}).hasValue()",
            lambda d: f"self.?{self.rng.choice(['name', 'nested', 'count'])}.hasValue()",
            lambda d: f"{self.of('timestamp', d)} < {self.of('timestamp', d)}",
            lambda d: f"{self.of('duration', d)} > duration('{self.rng.choice(_DURATIONS)}')",
            lambda d: f"{self.of('list', d)} == {self.of('list', d)}",
            lambda d: f"{self.of('map', d)}.exists(k, v, v == {self.of('string', 0)})",
            lambda d: f"isURL({self.of('string', d)})",
            lambda d: f"{self.of('int', d)} in [1, 2, 3]",
        ], d)  # fmt: skip

    def _loop(self, macro: str, d: int) -> str:
        name = self.rng.choice(["x", "y", "z"])
        listing = self.of("list", d)
        self.variables.append((name, "string"))
        try:
            body = self.of("bool", d)
        finally:
            self.variables.pop()
        return f"{listing}.{macro}({name}, {body})"

    def _int(self, d: int) -> str:
        leaf = [
            lambda d: self.field("count"),
            lambda d: str(self.rng.choice([0, 1, 2, 10, -1, 63, 9223372036854775807])),
            lambda d: f"size({self.field('name')})",
        ]
        if d == 0:
            return self.pick(leaf, d)
        return self.pick([
            *leaf,
            lambda d: f"{self.of('string', d)}.size()",
            lambda d: f"{self.of('list', d)}.size()",
            lambda d: f"({self.of('int', d)} {self.rng.choice(['+', '-', '*', '/', '%'])} "
                      f"{self.of('int', d)})",
            lambda d: f"int({self.of('double', d)})",
            lambda d: f"int({self.of('string', d)})",
            lambda d: f"{self.of('string', d)}.indexOf({self.of('string', 0)})",
            lambda d: f"{self.of('list', d)}.filter(x, x != '').size()",
            lambda d: f"quantity({self.of('string', d)}).asInteger()",
            lambda d: f"{self.of('map', d)}.size()",
            lambda d: f"self.?count.orValue({self.of('int', 0)})",
            lambda d: f"{self.of('timestamp', d)}.getFullYear()",
        ], d)  # fmt: skip

    def _double(self, d: int) -> str:
        leaf = [lambda d: self.field("ratio"), lambda d: self.rng.choice(["1.5", "0.0", "-2.5"])]
        if d == 0:
            return self.pick(leaf, d)
        return self.pick([
            *leaf,
            lambda d: f"double({self.of('int', d)})",
            lambda d: f"({self.of('double', d)} {self.rng.choice(['+', '*', '/'])} "
                      f"{self.of('double', d)})",
            lambda d: f"quantity({self.of('string', d)}).asApproximateFloat()",
        ], d)  # fmt: skip

    def _string(self, d: int) -> str:
        leaf = [
            lambda d: self.field(self.rng.choice(["name", "text", "memory", "addr"])),
            lambda d: self.rng.choice(["'a'", "''", "'web'", "'1Gi'", "'x-y'"]),
        ]
        if d == 0:
            return self.pick(leaf, d)
        return self.pick([
            *leaf,
            lambda d: f"{self.of('string', d)} + {self.of('string', d)}",
            lambda d: f"{self.of('string', d)}.lowerAscii()",
            lambda d: f"{self.of('string', d)}.substring({self.of('int', 0)})",
            lambda d: f"{self.of('string', d)}.replace('a', {self.of('string', 0)})",
            lambda d: f"{self.of('string', d)}.trim()",
            lambda d: f"string({self.of('int', d)})",
            lambda d: f"{self.of('list', d)}[{self.of('int', 0)}]",
            lambda d: f"{self.field('labels')}[{self.of('string', 0)}]",
            lambda d: f"self.?name.orValue({self.of('string', 0)})",
            lambda d: f"{self.of('list', d)}.join(',')",
            lambda d: f"'%s-%d'.format([{self.of('string', d)}, {self.of('int', d)}])",
            lambda d: f"{self.of('string', d)}.split('-')[0]",
            lambda d: f"{self.field('nested')}.a",
            lambda d: f"{self.of('string', d)}.charAt({self.of('int', 0)})",
        ], d)  # fmt: skip

    def _list(self, d: int) -> str:
        leaf = [
            lambda d: self.field(self.rng.choice(["tags", "set"])),
            lambda d: self.rng.choice(["['a', 'b']", "[]", "['x']"]),
        ]
        if d == 0:
            return self.pick(leaf, d)
        return self.pick([
            *leaf,
            lambda d: f"{self.of('string', d)}.split(',')",
            lambda d: f"{self.of('list', d)}.filter(x, x.size() > 1)",
            lambda d: f"{self.of('list', d)}.map(x, x + 'z')",
            lambda d: f"{self.of('list', d)} + {self.of('list', d)}",
            lambda d: f"{self.field('labels')}.map(k, k)",
        ], d)  # fmt: skip

    def _map(self, d: int) -> str:
        return self.rng.choice([self.field("labels"), "{'app': 'web'}"])

    def _timestamp(self, d: int) -> str:
        return self.rng.choice([self.field("when"), "timestamp('2025-01-01T00:00:00Z')",
                                f"{self.field('when')} + duration('1h')"])  # fmt: skip

    def _duration(self, d: int) -> str:
        return self.rng.choice([self.field("timeout"), "duration('90s')",
                                f"{self.field('timeout')} * 2"])  # fmt: skip


_KINDS = ("bool", "int", "double", "string", "list", "map", "timestamp", "duration")
_REGEXES = ["^[a-z]+$", "[0-9]", "^a.*b$", "(x|y)+", ".*"]
_DURATIONS = ["1h", "30s", "1m30s", "0s"]


def _random_cases(rng: random.Random, count: int) -> list[Case]:
    """``count`` CRDs, each with one random rule over spec (sometimes a messageExpression)."""
    cases = []
    for number in range(count):
        expressions = _Expressions(rng)
        rule: JSON = {"rule": expressions.of("bool", rng.choice((2, 3, 3, 4)))}
        if rng.random() < 0.2:
            rule["messageExpression"] = expressions.of("string", 2)
        template = Template((rule,), fields=tuple(sorted(expressions.fields)))
        cases.append(_template_case(rng, "compile", f"compile:random/{number}", template, (5, 0)))
    return cases


# --------------------------------------------------------------------------------------------
# The whole run


def generate(seed: int = SEED) -> list[Case]:
    """Every case of one run, the same for the same seed."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for group in GROUPS:
        if group == "cost":
            cases += _cost_cases(rng)
        else:
            cases += _template_cases(rng, group, mutations=0.7 if group == "compile" else 0.15)
        if group == "compile":
            cases += _random_cases(rng, RANDOM_RULES)
    return cases


def run(client: Client, seed: int = SEED) -> list[Judged]:
    return judge(client, generate(seed))


def main(argv: list[str] | None = None) -> int:
    import argparse  # noqa: PLC0415 - only for the development entry point

    from modelplane_realplane import plane as planes  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="the plane's run directory")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--quiet", action="store_true", help="figures only")
    args = parser.parse_args(argv)
    plane = planes.Plane.load(args.run)
    if plane is None:
        parser.error(f"no plane in {args.run}")
        return 2
    begin = time.monotonic()
    judged = run(plane.client(), args.seed)
    if not args.quiet:
        for j in judged:
            if not j.agree:
                print(j.describe())
    print(summary(judged))
    counts = Counter(j.group for j in judged)
    print(f"{len(judged)} verdict pairs ({dict(counts)}), {time.monotonic() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
