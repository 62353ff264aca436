"""Runtime template validation, override rules and rendering of a job's resolved spec.

Template spec shape: see `scheduling.models.templates.RuntimeTemplateVersion`. Overrides shape::

    {"podSets": {"<pod set>": {"replicas": int, "image": str, "command": [str], "args": [str],
                               "env": {"NAME": "value"}, "resources": {"cpu": "4", "nvidia.com/gpu": "1"},
                               "nodeSelector": {"k": "v"}, "container": "<container name, default: first>"}},
     "minMember": int, "scheduleTimeoutSeconds": int, "priorityClassName": str}

A job may set an override only when one of the template's `overridable` patterns covers its path. Patterns
are dotted paths where `*` matches one segment and a pattern also covers everything below it, e.g.
"podSets.*.resources", "podSets.worker", "minMember".
"""
from __future__ import annotations

import copy

from django.core.exceptions import ValidationError

from ...backends import registry
from ...backends.base import gang_minimum
from ...constants import DEFAULT_SCHEDULE_TIMEOUT_SECONDS, KAI_DURATIONS
from ...kube import quantities
from .. import validation as v
from . import spec_limits

POD_SET_OVERRIDE_FIELDS = ("replicas", "image", "command", "args", "env", "resources", "nodeSelector", "container")
TOP_OVERRIDE_FIELDS = ("podSets", "minMember", "scheduleTimeoutSeconds", "priorityClassName")
PREEMPTIBILITY = ("", "preemptible", "non-preemptible")
# gang.disruptionMode: Kubernetes v1beta1 PodGroup `disruptionMode` {single: {}} | {all: {}} (k8s-workload family;
# other backends and v1alpha2 on 1.36, where its gate is off, ignore it).
DISRUPTION_MODES = ("single", "all")
MAX_REPLICAS = 10_000
# `retentionSeconds`: how long a finished job's Indexed Jobs and pods stay (0 = removed as soon as it finished).
MAX_RETENTION_SECONDS = 30 * 86400
# The built-in system- PriorityClasses and their values (k8s pkg/apis/scheduling: SystemCriticalPriority and +1000).
# PriorityClass validation reserves the prefix for these two and caps every other class at 1000000000
# (HighestUserDefinablePriority), so a system- name is the only way a job asks for more than that.
SYSTEM_PRIORITY_PREFIX = "system-"
SYSTEM_PRIORITIES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def _resource(rname, qty, field: str) -> None:
    """One entry of a resources map under `field`: its name must be a qualified name (apimachinery
    `IsQualifiedName`, as the API server's pod validation requires of every resource name: "cpu", "nvidia.com/gpu")
    and its amount a quantity (`quantities.parse_resource`). Raises ValidationError naming the entry."""
    if not v.is_qualified_name(rname):
        shown = repr(rname[:80]) if isinstance(rname, str) else type(rname).__name__
        raise ValidationError({field: f"{shown} is not a valid resource name: an optional DNS-subdomain prefix and a "
                                      "name of at most 63 letters, digits, '-', '_' or '.' (e.g. nvidia.com/gpu)"})
    quantities.parse_resource(rname, qty, f"{field}.{rname}")


def _container(c, field: str, names: set) -> None:
    v.mapping(c, field)
    name = v.dns_label(c.get("name"), f"{field}.name")
    if name in names:
        raise ValidationError({f"{field}.name": f"duplicate container name '{name}'"})
    names.add(name)
    v.image(c.get("image"), f"{field}.image")
    for key in ("command", "args"):
        if key in c:
            v.string_list(c[key], f"{field}.{key}")
    if "env" in c:
        if not isinstance(c["env"], list):
            raise ValidationError({f"{field}.env": "must be a list of {name, value} objects"})
        for i, e in enumerate(c["env"]):
            v.mapping(e, f"{field}.env[{i}]")
            name = v.string(e.get("name"), f"{field}.env[{i}].name", max_length=253)
            if not v.ENV_NAME.fullmatch(name):
                raise ValidationError({f"{field}.env[{i}].name": f"'{name}' is not a valid environment variable name"})
            if "value" in e:
                v.string(e["value"], f"{field}.env[{i}].value", allow_empty=True, max_length=65536)
    resources = c.get("resources", {})
    v.mapping(resources, f"{field}.resources")
    for part in ("requests", "limits"):
        for rname, qty in v.mapping(resources.get(part, {}), f"{field}.resources.{part}").items():
            _resource(rname, qty, f"{field}.resources.{part}")


def _scheduling_gates(gates, field: str) -> None:
    """`schedulingGates`: a list of {name} with unique qualified names, as the API server requires (core/v1
    validation, validateSchedulingGates); otherwise every job of the template is refused in the cluster."""
    if gates is None:
        return
    if not isinstance(gates, list):
        raise ValidationError({field: "must be a list of {name} objects"})
    seen = set()
    for i, gate in enumerate(gates):
        name = v.mapping(gate, f"{field}[{i}]").get("name")
        if not v.is_qualified_name(name):
            raise ValidationError({f"{field}[{i}].name": f"'{str(name)[:80]}' is not a qualified name "
                                                         "(e.g. example.com/hold)"})
        if name in seen:
            raise ValidationError({f"{field}[{i}].name": f"duplicate scheduling gate '{name}'"})
        seen.add(name)


def validate_pod_template(template, field: str) -> None:
    """Validate a core/v1 PodTemplateSpec dict: at least one container, names, images, env and quantities.

    Raises ValidationError({"<field>.spec.containers[0].image": "must not be empty"}) and similar.
    """
    v.mapping(template, field)
    spec = v.mapping(template.get("spec"), f"{field}.spec")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ValidationError({f"{field}.spec.containers": "at least one container is required"})
    names: set[str] = set()
    for i, c in enumerate(containers):
        _container(c, f"{field}.spec.containers[{i}]", names)
    for i, c in enumerate(spec.get("initContainers") or []):
        _container(c, f"{field}.spec.initContainers[{i}]", names)
    if "nodeSelector" in spec:
        v.label_map(spec["nodeSelector"], f"{field}.spec.nodeSelector")
    if "tolerations" in spec and not isinstance(spec["tolerations"], list):
        raise ValidationError({f"{field}.spec.tolerations": "must be a list"})
    _scheduling_gates(spec.get("schedulingGates"), f"{field}.spec.schedulingGates")
    if spec.get("priorityClassName"):
        v.dns_subdomain(spec["priorityClassName"], f"{field}.spec.priorityClassName")
    for rname, qty in v.mapping(spec.get("overhead", {}), f"{field}.spec.overhead").items():
        quantities.parse(qty, f"{field}.spec.overhead.{rname}")
    if spec.get("runtimeClassName") is not None:
        v.dns_subdomain(spec["runtimeClassName"], f"{field}.spec.runtimeClassName")
    pod_resources = v.mapping(spec.get("resources", {}), f"{field}.spec.resources")  # pod-level (KEP-2837)
    for part in ("requests", "limits"):
        for rname, qty in v.mapping(pod_resources.get(part, {}), f"{field}.spec.resources.{part}").items():
            _resource(rname, qty, f"{field}.spec.resources.{part}")
    meta = v.mapping(template.get("metadata", {}), f"{field}.metadata")
    if "labels" in meta:
        v.label_map(meta["labels"], f"{field}.metadata.labels")


def check_gang_priority_class(family: str, name, field: str) -> None:
    """Raise ValidationError({field: ...}) when `name` is a system- PriorityClass and `family`'s newest plugin
    (what an up-to-date cluster runs) sets it on a gang object capped below it (`max_gang_priority`).

    The k8s-workload family's v1beta1 PodGroup (Kubernetes 1.37) carries the job's priorityClassName; the Priority
    admission plugin fills `spec.priority` from the class and the API server refuses any value over 1000000000
    (`PodGroupSpec.priority` `+k8s:maximum`, k8s.io/api scheduling/v1beta1). system-cluster-critical (2000000000)
    and system-node-critical (2000001000) are over it in every namespace, kube-system included, so such a job could
    never start: refused here rather than failed in the cluster. Other families' gang objects have no such cap,
    and a pod template's own priorityClassName is not copied to the gang (its pods may use one)."""
    plugin = registry.newest(family)
    limit = getattr(plugin, "max_gang_priority", None)
    if limit is None or not isinstance(name, str) or not name.startswith(SYSTEM_PRIORITY_PREFIX):
        return
    value = SYSTEM_PRIORITIES.get(name)
    value_text = f"priority {value:,}" if value is not None else "a system priority"
    raise ValidationError({field: f"'{name}' has {value_text}; the {family} backend's PodGroup "
                                  f"({plugin.api_version}) takes at most {limit:,}, so the API server would refuse "
                                  "it in every namespace: choose a PriorityClass of value 1,000,000,000 or less"})


def validate_template_spec(spec, field: str = "spec") -> dict:
    """Validate a runtime template spec and return it with defaults filled in (a new dict).

    Raises ValidationError naming the field, e.g. {"spec.podSets[1].name": "duplicate pod set name 'worker'"}, or
    naming the limit for a spec over `spec_limits` (size, depth), checked first: copying it is recursive.
    """
    v.mapping(spec, field)
    spec_limits.check(spec, field)
    spec = copy.deepcopy(spec)
    backend = spec.get("backend")
    if backend not in registry.family_names():
        raise ValidationError({f"{field}.backend": f"'{backend}' is not a backend; choose one of "
                                                   f"{', '.join(registry.family_names())}"})
    pod_sets = spec.get("podSets")
    if not isinstance(pod_sets, list) or not pod_sets:
        raise ValidationError({f"{field}.podSets": "at least one pod set is required"})
    most = registry.max_pod_sets(backend)
    if most is not None and len(pod_sets) > most:
        raise ValidationError({f"{field}.podSets": f"the '{backend}' backend takes at most {most} pod sets (its gang "
                                                   f"object holds one entry per pod set); this spec has "
                                                   f"{len(pod_sets)}"})
    names: set[str] = set()
    for i, ps in enumerate(pod_sets):
        f = f"{field}.podSets[{i}]"
        v.mapping(ps, f)
        name = v.dns_label(ps.get("name"), f"{f}.name", max_length=20)
        if name in names:
            raise ValidationError({f"{f}.name": f"duplicate pod set name '{name}'"})
        names.add(name)
        replicas = v.integer(ps.get("replicas"), f"{f}.replicas", minimum=1, maximum=MAX_REPLICAS)
        if ps.get("minMember") is not None:  # 0: an optional set, where the backend can express it
            v.integer(ps["minMember"], f"{f}.minMember", minimum=0, maximum=replicas)
        validate_pod_template(ps.get("template"), f"{f}.template")
    gang = v.mapping(spec.setdefault("gang", {}), f"{field}.gang")
    total = sum(ps["replicas"] for ps in pod_sets)
    if gang.get("minMember") is not None:
        v.integer(gang["minMember"], f"{field}.gang.minMember", minimum=1, maximum=total)
    check_set_minimums(spec, lambda i, ps, cause: f"{field}.podSets[{i}].minMember" if cause == "set" else
                       f"{field}.gang.minMember" if cause == "gang" else f"{field}.podSets")
    gang.setdefault("scheduleTimeoutSeconds", DEFAULT_SCHEDULE_TIMEOUT_SECONDS)
    v.integer(gang["scheduleTimeoutSeconds"], f"{field}.gang.scheduleTimeoutSeconds", minimum=1, maximum=86400 * 7)
    for key, negative in KAI_DURATIONS.items():
        if gang.get(key) is None:
            continue
        if backend != "kai":
            raise ValidationError({f"{field}.gang.{key}": f"only the kai backend has {key} (this template uses "
                                                          f"'{backend}')"})
        v.duration(gang[key], f"{field}.gang.{key}", allow_negative=negative)
    if gang.get("disruptionMode") is not None and gang["disruptionMode"] not in DISRUPTION_MODES:
        raise ValidationError({f"{field}.gang.disruptionMode": "must be 'single' (members may be disrupted one by "
                                                               "one) or 'all' (only together)"})
    if spec.get("priorityClassName"):
        v.dns_subdomain(spec["priorityClassName"], f"{field}.priorityClassName")
        check_gang_priority_class(backend, spec["priorityClassName"], f"{field}.priorityClassName")
    if spec.setdefault("preemptibility", "") not in PREEMPTIBILITY:
        raise ValidationError({f"{field}.preemptibility": "must be '', 'preemptible' or 'non-preemptible'"})
    if spec.get("topologyConstraint") is not None:
        v.mapping(spec["topologyConstraint"], f"{field}.topologyConstraint")
    if spec.get("retentionSeconds") is not None:
        v.integer(spec["retentionSeconds"], f"{field}.retentionSeconds", minimum=0, maximum=MAX_RETENTION_SECONDS)
    overridable = spec.setdefault("overridable", [])
    v.string_list(overridable, f"{field}.overridable")
    for i, pattern in enumerate(overridable):
        _check_pattern(pattern, f"{field}.overridable[{i}]", names)
    return spec


def check_set_minimums(spec: dict, key) -> None:
    """Per-pod-set minimums are honoured or refused, never dropped (issue 30). `spec`: a template spec or a resolved
    spec (pod sets already validated: `replicas` >= 1, `minMember` within 0..replicas when given); `key(i, pod
    set, cause)` names the field of a refusal (`cause`: "set", "gang" or "none").

    Raises ValidationError (400) naming the pod set and the backend when:
    - the backend family cannot hold a pod set to its own minimum (`registry.expresses_set_minimums`: k8s-workload
      and coscheduling have one group with one count) and a pod set's `minMember` is below its replicas, 0
      included, or a set states a `minMember` while the gang's own minimum is below the job's pods (the one count
      would let the scheduler place the gang without that set);
    - no `gang.minMember` is given and every pod set's minimum is 0: the gang's minimum (`gang_minimum`, their sum)
      would be 0, no gang at all, which KAI's PodGroup refuses too (top-level `minMember` >= 1).
    """
    backend = spec.get("backend", "")
    pod_sets = spec["podSets"]
    gang = spec.get("gang") or {}
    total = sum(ps["replicas"] for ps in pod_sets)
    if backend in registry.family_names() and not registry.expresses_set_minimums(backend):
        cannot = registry.newest(backend).set_minimum_refusal
        for i, ps in enumerate(pod_sets):
            stated = ps.get("minMember")
            if stated is None:
                continue
            if stated < ps["replicas"]:
                what = "0 (an optional set)" if stated == 0 else f"{stated}"
                raise ValidationError({key(i, ps, "set"): (
                    f"pod set '{ps['name']}' has minMember {what}, below its {ps['replicas']} replicas; the "
                    f"'{backend}' backend cannot hold a pod set to its own minimum ({cannot}): remove minMember or "
                    f"set it to {ps['replicas']}, or use a backend that can (kai, volcano)")})
            if gang.get("minMember") is not None and gang["minMember"] < total:
                raise ValidationError({key(i, ps, "gang"): (
                    f"pod set '{ps['name']}' has minMember {stated}, but the gang's minMember {gang['minMember']} is "
                    f"below the job's {total} pods; the '{backend}' backend cannot hold a pod set to its own minimum "
                    f"({cannot}), so the scheduler could place the gang without '{ps['name']}': give the gang "
                    f"minMember {total}, or remove the pod set's minMember, or use a backend that can (kai, "
                    "volcano)")})
    if gang.get("minMember") is None and gang_minimum(spec) == 0:
        raise ValidationError({key(None, None, "none"): (
            "every pod set has minMember 0: the gang would require no pod at all; set a pod set's minMember above 0 "
            "or give gang.minMember")})


def _check_pattern(pattern: str, field: str, pod_sets: set[str]) -> None:
    parts = pattern.split(".")
    if parts[0] not in TOP_OVERRIDE_FIELDS or (parts[0] != "podSets" and len(parts) > 1):
        raise ValidationError({field: f"'{pattern}' is not an overridable path; top-level fields are "
                                      f"{', '.join(TOP_OVERRIDE_FIELDS)}"})
    if parts[0] == "podSets" and len(parts) > 1:
        if parts[1] != "*" and parts[1] not in pod_sets:
            raise ValidationError({field: f"'{pattern}' names an unknown pod set '{parts[1]}'"})
        if len(parts) > 2 and (len(parts) > 3 or parts[2] not in POD_SET_OVERRIDE_FIELDS):
            raise ValidationError({field: f"'{pattern}': pod set fields are {', '.join(POD_SET_OVERRIDE_FIELDS)}"})


def _allowed(path: list[str], patterns: list[str]) -> bool:
    for pattern in patterns:
        parts = pattern.split(".")
        if len(parts) <= len(path) and all(p in ("*", s) for p, s in zip(parts, path, strict=False)):
            return True
    return False


def _override_paths(overrides: dict) -> list[list[str]]:
    """Leaf paths the job sets, at the granularity that patterns name (pod-set fields are leaves)."""
    paths = []
    for key, value in overrides.items():
        if key == "podSets" and isinstance(value, dict):
            for ps, fields in value.items():
                if isinstance(fields, dict):
                    paths.extend(["podSets", ps, f] for f in fields)
                else:
                    paths.append(["podSets", ps])
        else:
            paths.append([key])
    return paths


def render(spec: dict, overrides, field: str = "overrides") -> dict:
    """Apply a job's overrides to a validated template spec and return the resolved spec (a new dict).

    The template spec is never mutated. Raises ValidationError naming the override, e.g.
    {"overrides.podSets.worker.image": "is not overridable in this template (allowed: podSets.*.replicas)"}, and
    {"template_version": ...} for a stored spec over `spec_limits` (written before the limits existed): copying
    it is recursive, and a job would carry all of it.
    """
    v.mapping(overrides, field)
    spec_limits.check(overrides, field)
    too_big = spec_limits.problem(spec)
    if too_big:
        raise ValidationError({"template_version": f"this template version's spec {too_big}; it was stored before "
                                                   "that limit existed: store a smaller version"})
    allowed = spec.get("overridable", [])
    pod_set_names = [ps["name"] for ps in spec["podSets"]]
    for path in _override_paths(overrides):
        dotted = ".".join([field, *path])
        if path[0] not in TOP_OVERRIDE_FIELDS:
            raise ValidationError({dotted: "is not a field that can be overridden"})
        if path[0] == "podSets":
            if not isinstance(overrides["podSets"], dict):
                raise ValidationError({f"{field}.podSets": "must be an object keyed by pod set name"})
            if path[1] not in pod_set_names:
                raise ValidationError({f"{field}.podSets.{path[1]}":
                                       f"unknown pod set '{path[1]}' (template has {', '.join(pod_set_names)})"})
            if len(path) < 3:
                raise ValidationError({dotted: "must be an object of pod set fields"})
            if path[2] not in POD_SET_OVERRIDE_FIELDS:
                raise ValidationError({dotted: "unknown field; pod set fields are "
                                               + ", ".join(POD_SET_OVERRIDE_FIELDS)})
        if path[-1] != "container" and not _allowed(path, allowed):
            raise ValidationError({dotted: "is not overridable in this template (allowed: "
                                           f"{', '.join(allowed) or 'nothing'})"})

    resolved = copy.deepcopy(spec)
    resolved.pop("overridable", None)
    gang = resolved["gang"]
    if "minMember" in overrides:
        gang["minMember"] = v.integer(overrides["minMember"], f"{field}.minMember", minimum=1)
    if "scheduleTimeoutSeconds" in overrides:
        gang["scheduleTimeoutSeconds"] = v.integer(overrides["scheduleTimeoutSeconds"],
                                                   f"{field}.scheduleTimeoutSeconds", minimum=1, maximum=86400 * 7)
    if "priorityClassName" in overrides:
        resolved["priorityClassName"] = v.dns_subdomain(overrides["priorityClassName"], f"{field}.priorityClassName")
        check_gang_priority_class(resolved.get("backend", ""), resolved["priorityClassName"],
                                  f"{field}.priorityClassName")
    for ps in resolved["podSets"]:
        fields = overrides.get("podSets", {}).get(ps["name"])
        if fields:
            _apply_pod_set(ps, fields, f"{field}.podSets.{ps['name']}")
    total = sum(ps["replicas"] for ps in resolved["podSets"])
    if gang.get("minMember") is not None and gang["minMember"] > total:
        raise ValidationError({f"{field}.minMember": f"gang minMember {gang['minMember']} exceeds the {total} "
                                                     "replicas of the job"})
    for ps in resolved["podSets"]:
        if ps.get("minMember") is not None and ps["minMember"] > ps["replicas"]:
            ps["minMember"] = ps["replicas"]
    check_set_minimums(resolved, _override_key(overrides, field))
    return resolved


def _override_key(overrides: dict, field: str):
    """`check_set_minimums`'s `key` at submit: the job's own override when it caused the refusal (a pod set's
    `replicas`, the gang's `minMember`), else `template_version` (a version stored before the rule)."""
    replicas_set = {name for name, fields in (overrides.get("podSets") or {}).items()
                    if isinstance(fields, dict) and "replicas" in fields}

    def key(i, ps, cause):
        if cause == "set" and ps["name"] in replicas_set:
            return f"{field}.podSets.{ps['name']}.replicas"
        if cause == "gang" and "minMember" in overrides:
            return f"{field}.minMember"
        return "template_version"

    return key


def _apply_pod_set(ps: dict, fields: dict, field: str) -> None:
    spec = ps["template"]["spec"]
    containers = spec["containers"]
    target = containers[0]
    if "container" in fields:
        by_name = {c["name"]: c for c in containers}
        if not isinstance(fields["container"], str) or fields["container"] not in by_name:
            raise ValidationError({f"{field}.container": f"unknown container '{str(fields['container'])[:80]}'; "
                                                         f"give one of {', '.join(sorted(by_name))}"})
        target = by_name[fields["container"]]
    if "replicas" in fields:
        ps["replicas"] = v.integer(fields["replicas"], f"{field}.replicas", minimum=1, maximum=MAX_REPLICAS)
    if "image" in fields:
        target["image"] = v.image(fields["image"], f"{field}.image")
    for key in ("command", "args"):
        if key in fields:
            target[key] = v.string_list(fields[key], f"{field}.{key}")
    if "env" in fields:
        env = {e["name"]: e for e in target.get("env", [])}
        for name, value in v.mapping(fields["env"], f"{field}.env").items():
            if not v.ENV_NAME.fullmatch(name):
                raise ValidationError({f"{field}.env.{name[:80]}": "is not a valid environment variable name"})
            env[name] = {"name": name, "value": v.string(value, f"{field}.env.{name}", allow_empty=True)}
        target["env"] = list(env.values())
    if "resources" in fields:
        resources = target.setdefault("resources", {})
        requests = resources.setdefault("requests", {})
        limits = resources.get("limits", {})
        for rname, qty in v.mapping(fields["resources"], f"{field}.resources").items():
            _resource(rname, qty, f"{field}.resources")
            requests[rname] = str(qty)
            # Extended resources (GPUs) must have limit == request; a lower template limit would be invalid.
            if quantities.is_extended_resource(rname) or rname in limits:
                resources.setdefault("limits", limits)[rname] = str(qty)
    if "nodeSelector" in fields:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **v.label_map(fields["nodeSelector"],
                                                                               f"{field}.nodeSelector")}


# Specs of template versions by (id, created_at), kept for the life of the process. A RuntimeTemplateVersion is
# immutable (a changed spec is stored as a new version; nothing updates a row, and the admin does not offer it), so
# its spec, once read, stays valid. created_at is part of the key because an id can come back after a rollback on
# SQLite (its AUTOINCREMENT counter is transactional), and then names another row. Only the spec is cached: the
# template's name and owning queue can change and are read with every submit.
_SPECS: dict[tuple[int, object], dict] = {}
SPEC_CACHE_SIZE = 512


def version_specs(keys) -> dict[tuple[int, object], dict]:
    """{(version id, created_at): spec} for `keys`, from the process cache; misses are read in one query.

    Callers must not mutate a returned spec (it is shared; `render` deep-copies before applying overrides).
    Keys of versions that no longer exist are absent from the result.
    """
    from ...models import RuntimeTemplateVersion

    keys = set(keys)
    missing = {vid for vid, created in keys if (vid, created) not in _SPECS}
    if missing:
        if len(_SPECS) + len(missing) > SPEC_CACHE_SIZE:
            _SPECS.clear()
        for vid, created, spec in RuntimeTemplateVersion.objects.filter(id__in=missing).order_by().values_list(
                "id", "created_at", "spec"):
            _SPECS[(vid, created)] = spec
    return {key: _SPECS[key] for key in keys if key in _SPECS}


def loadable_spec(field_name: str = "spec"):
    """An ORM expression for `RuntimeTemplateVersion.spec` that is the spec when its JSON text is within twice
    `spec_limits.max_bytes()` characters and NULL otherwise, measured in the database. Pages that list or show
    stored versions select it instead of `spec`, so a spec stored before the limits existed (a 70 MB alias bomb)
    is never sent to Python; `spec_limits.problem` then checks exactly what was loaded. (PostgreSQL's `jsonb::text`
    has a space after each separator, hence the margin.)"""
    from django.db.models import Case, F, IntegerField, JSONField, TextField, Value, When
    from django.db.models.functions import Cast, Length
    from django.db.models.lookups import LessThanOrEqual

    size = Length(Cast(field_name, TextField()), output_field=IntegerField())
    return Case(When(LessThanOrEqual(size, 2 * spec_limits.max_bytes()), then=F(field_name)),
                default=Value(None, output_field=JSONField()), output_field=JSONField())


def spec_shown(spec) -> tuple[dict | None, str]:
    """(spec, "") when a stored spec (as `loadable_spec` loaded it: None when too large) may be shown, else
    (None, message) saying which limit it breaks, for pages to print instead of the spec."""
    if spec is None:
        return None, (f"This version's spec is larger than {spec_limits.max_bytes()} characters; it was stored "
                      "before that limit existed and is not shown. Store a smaller version.")
    found = spec_limits.problem(spec)
    if found:
        return None, (f"This version's spec {found}; it was stored before that limit existed and is not shown. "
                      "Store a smaller version.")
    return spec, ""
