"""Pod-spec rules: what the pods gangweb creates may contain, and where they may run. Deny by default. Pure
checks on a spec and its queue chain, used alike by the submit paths (scheduling/services/) and the reconciler
before it creates anything (reconcile/jobs/reconciler.py); who may set a template's level and exceptions is
`services.templates.policy`'s.

- **Level.** Every pod set of a template, and of a job's resolved spec, meets a Kubernetes Pod Security Standard
  (podspec/pod_security.py): the strictest of the template's `pod_security_level`, its queue's and that queue's
  ancestors' (`baseline` unless one says `restricted`). A template is checked against its owning queue's chain
  when saved; a job against its own queue's chain when submitted, bulk-submitted or resubmitted, and again before
  the reconciler creates anything (reconcile/jobs/reconciler.py).
- **Tenant controls** (service accounts, token automount, nodeName, schedulerName, tolerating every taint,
  runtimeClassName, node-mounted volume types, system- priority classes): at every level.
- **Exceptions** are explicit: control ids in the template's `policy_exceptions`, set only by a platform admin,
  waive those controls for every version of that template wherever it is used. Nobody else bypasses anything,
  platform admins included: their templates need the exception like anyone's.
- **Namespaces** (`check_namespace`): a job's namespace must be in its queue's `allowed_namespaces` and in every
  ancestor's (an empty list allows none); reserved namespaces (`kube-*`, gangweb's own, GANGWEB_RESERVED_NAMESPACES)
  are refused always, also in a queue's list.

A refusal is a ValidationError (400) keyed by the field, e.g.
{"spec.podSets[worker].template.spec.hostNetwork": "Pod Security baseline control hostNamespaces: ..."}.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from . import pod_security as pss
from . import tenant_controls

RESERVED_PRIORITY_PREFIX = "system-"  # k8s reserves it: pkg/apis/scheduling (SystemPriorityClassPrefix)
RESERVED_NAMESPACE_PREFIX = "kube-"  # kube-system, kube-public, kube-node-lease: Kubernetes' own
EXCEPTION_HINT = "a platform admin can waive it for this template in policy_exceptions"


def is_reserved_priority_class(priority_class) -> bool:
    """True for a "system-" priority class name: the cluster's own."""
    return isinstance(priority_class, str) and priority_class.startswith(RESERVED_PRIORITY_PREFIX)


# ---- namespaces ----------------------------------------------------------------------------------------------------

# The namespaces the gang schedulers gangweb drives install themselves in by default (their Helm charts and
# manifests): a job there would run beside the scheduler, under its ServiceAccounts and Secrets.
SCHEDULER_NAMESPACES = frozenset({"kai-scheduler", "kueue-system", "volcano-system", "scheduler-plugins"})


def reserved_namespaces() -> frozenset[str]:
    """Namespaces no queue may use besides the `kube-` prefix: the schedulers' own (`SCHEDULER_NAMESPACES`),
    GANGWEB_NAMESPACE (where gangweb itself runs, when set) and GANGWEB_RESERVED_NAMESPACES (comma-separated, e.g.
    a scheduler installed elsewhere)."""
    names = set(SCHEDULER_NAMESPACES) | set(getattr(settings, "GANGWEB_RESERVED_NAMESPACES", ()) or ())
    own = getattr(settings, "GANGWEB_NAMESPACE", "")
    if own:
        names.add(own)
    return frozenset(names)


def is_reserved_namespace(name) -> bool:
    """True for Kubernetes' own namespaces (`kube-*`) and those of `reserved_namespaces()`."""
    return isinstance(name, str) and (name.startswith(RESERVED_NAMESPACE_PREFIX) or name in reserved_namespaces())


def check_allowed_namespace(name: str, field: str) -> None:
    """Raise ValidationError({field: ...}) when a queue is given a reserved namespace."""
    if is_reserved_namespace(name):
        raise ValidationError({field: f"'{name}' is reserved for the cluster's or gangweb's own components; no "
                                      "queue may run jobs there"})


def queue_chain(queue, tree=None) -> list:
    """[queue, parent, ..., top-level queue]: from `tree` (a queueing.tree.QueueTree holding the ancestors) when
    given, else by following `parent` (one query per level)."""
    if queue is None:
        return []
    if tree is not None and queue.id in tree.by_id:
        return [queue, *tree.ancestors(tree.by_id[queue.id])]
    chain, seen, q = [queue], {queue.pk}, queue.parent
    while q is not None and q.pk not in seen:
        chain.append(q)
        seen.add(q.pk)
        q = q.parent
    return chain


def check_namespace(queue, namespace: str, chain=None, field: str = "namespace") -> None:
    """Raise ValidationError({field: ...}) unless jobs of `queue` may run in `namespace`: not reserved, in the
    queue's `allowed_namespaces` and in each ancestor's (`chain` from `queue_chain`, default: walked)."""
    if is_reserved_namespace(namespace):
        raise ValidationError({field: f"'{namespace}' is reserved for the cluster's or gangweb's own components"})
    for q in chain if chain is not None else queue_chain(queue):
        allowed = q.allowed_namespaces or []
        if namespace in allowed:
            continue
        mine = q is queue or (q.pk is not None and q.pk == queue.pk)
        whose = f"queue '{q.name}'" if mine else f"its parent queue '{q.name}'"
        if not allowed:
            raise ValidationError({field: f"{whose} allows no namespaces; its parent's admin (a platform admin for "
                                          "a top-level queue) lists them in allowed_namespaces"})
        raise ValidationError({field: f"{whose} allows namespaces {', '.join(allowed)}, not '{namespace}'"})


# ---- levels and rules -------------------------------------------------------------------------------------

def level_of(template=None, chain=()) -> str:
    """The level a template's pods meet in a queue: the strictest of the template's and of the queue chain's."""
    levels = [getattr(q, "pod_security_level", "") for q in chain]
    return pss.stricter(getattr(template, "pod_security_level", "") or "", *levels)


def tenant_rules(chain=()) -> tenant_controls.TenantRules:
    """Service accounts (besides "default") allowed by every queue of `chain`; none without a queue."""
    accounts = None
    for q in chain:
        mine = set(q.allowed_service_accounts or [])
        accounts = mine if accounts is None else accounts & mine
    return tenant_controls.TenantRules(service_accounts=frozenset(accounts or ()))


def _title(control: str) -> str:
    c = pss.CONTROLS[control]
    kind = "gangweb tenant control" if c.level == pss.TENANT else f"Pod Security {c.level} control"
    return f"{kind} {control}"


def violations(spec, level: str, rules: tenant_controls.TenantRules, exceptions=()) -> dict[str, str]:
    """{path: message} for every violation in a template spec or resolved spec (any shape tolerated). Paths name
    pod sets by name, e.g. "podSets[worker].template.spec.hostNetwork"; messages name the control."""
    found: dict[str, str] = {}
    if not isinstance(spec, dict):
        return found
    if is_reserved_priority_class(spec.get("priorityClassName")) and "priorityClassName" not in exceptions:
        found["priorityClassName"] = (f"{_title('priorityClassName')}: system- priority classes are the cluster's "
                                      f"own; {EXCEPTION_HINT}")
    pod_sets = spec.get("podSets")
    for i, ps in enumerate(pod_sets if isinstance(pod_sets, list) else []):
        name = ps.get("name") if isinstance(ps, dict) else None
        at = f"podSets[{str(name)[:20] if isinstance(name, str) and name else i}].template"
        template = ps.get("template") if isinstance(ps, dict) else None
        for v in tenant_controls.check_pod(template, level, rules, exceptions):
            found.setdefault(f"{at}.{v.field}", f"{_title(v.control)}: {v.message}; {EXCEPTION_HINT}")
    return found


def _raise(found: dict[str, str], field: str) -> None:
    if found:
        raise ValidationError({f"{field}.{path}": message for path, message in found.items()})


def check_template_spec(spec: dict, template=None, queue=None, exceptions=None, level: str | None = None,
                        field: str = "spec") -> None:
    """Raise ValidationError naming each refused field of a template spec (`field`.<path>) and its control.

    Checked at the strictest of `level` (the template's pod_security_level being saved; default: `template`'s) and
    the owning `queue` chain's, with that queue chain's service accounts and `exceptions` (default: `template`'s).
    """
    chain = queue_chain(queue)
    level = pss.stricter(level if level is not None else getattr(template, "pod_security_level", "") or "",
                         level_of(None, chain))
    if exceptions is None:
        exceptions = getattr(template, "policy_exceptions", None) or []
    _raise(violations(spec, level, tenant_rules(chain), exceptions), field)


def check_job_spec(resolved: dict, template, queue, tree=None, field: str = "resolved_spec") -> None:
    """Raise ValidationError naming each refused field of a job's resolved spec: the level of `template` in
    `queue`'s chain (`tree` from the submit's lookups saves the queries), the chain's service accounts and the
    template's exceptions. Every submit path calls it; so does the reconciler before creating anything."""
    chain = queue_chain(queue, tree)
    _raise(violations(resolved, level_of(template, chain), tenant_rules(chain),
                      getattr(template, "policy_exceptions", None) or []), field)
