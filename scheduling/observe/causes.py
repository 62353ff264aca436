"""Blocking facts of why_pending that are not the scheduler's or the queue's numbers: pods the cluster refuses to
create, scheduling gates gangweb did not add, a scheduler that never acts, and free room split over nodes.

Each function returns a list of facts shaped like the capacity and queue facts of `observe.why_pending`
(``{"code": ..., <numbers>, "message": <a lower-case clause>}``), most certain first.

Everything quoted here comes from a managed cluster and is hostile input: server messages are cut to
`MAX_QUOTE` characters with control characters replaced (`quote`); the pages render them as text, never HTML.

Sources of semantics:
- the Job controller records a `FailedCreate` Warning event on the batch/v1 Job each time the API server refuses a
  pod (`pkg/controller/job/job_controller.go`, `recordFailedCreate`), with the server's message: admission
  (`Priority` plugin: "no PriorityClass with name x was found"; `RuntimeClass`: 'RuntimeClass "x" not found';
  `ResourceQuota`: "exceeded quota: q, requested: ..., used: ..., limited: ..."; `LimitRanger`: "maximum cpu usage
  per Container is 2, but limit is 4"; webhooks: 'admission webhook "x" denied the request: ...');
- `spec.schedulingGates` (KEP-3521): a gate may only be removed after creation, by whoever added it (gates are
  named `<owner's domain>/<name>` by convention). gangweb adds no gate, so every gate is someone else's, and
  gangweb never removes one;
- node free room: `status.allocatable` minus the requests of pods bound there (kube-scheduler's `NodeResourcesFit`
  arithmetic), where gangweb counts only the pods it manages: the free room it states is an upper bound.
"""
from __future__ import annotations

import re
from datetime import datetime

from .pods import PodFacts

POD_CREATE_REFUSED = "PodCreateRefused"
FOREIGN_GATE = "ForeignSchedulingGate"
SCHEDULER_SILENT = "SchedulerSilent"
QUEUE_MANAGER_NOT_SEEN = "QueueManagerNotSeen"
NODES_FRAGMENTED = "NodesFragmented"
MAX_QUOTE = 400
MAX_REFUSALS = 3
# Gates gangweb itself adds to pods (none today); any other gate is foreign and is only reported.
GANGWEB_GATES: frozenset[str] = frozenset()
JOB_CONTROLLER = "kube-controller-manager"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")

# What a FailedCreate message is about, by the admission plugin's own wording (first match wins).
CAUSES = (
    ("PriorityClass", re.compile(r"PriorityClass", re.I)),
    ("RuntimeClass", re.compile(r"RuntimeClass|Overhead", re.I)),
    ("ResourceQuota", re.compile(r"exceeded quota|must specify limits|must specify requests", re.I)),
    ("LimitRange", re.compile(r"(maximum|minimum) .* usage per|limit to request ratio", re.I)),
    ("AdmissionWebhook", re.compile(r"admission webhook", re.I)),
)
CAUSE_WORDS = {"PriorityClass": "a PriorityClass the cluster lacks", "RuntimeClass": "its RuntimeClass",
               "ResourceQuota": "the namespace's ResourceQuota", "LimitRange": "the namespace's LimitRange",
               "AdmissionWebhook": "an admission webhook", "Other": "the API server"}


def quote(text, limit: int = MAX_QUOTE) -> str:
    """`text` from a cluster made safe to show as one line: control and bidi characters replaced by a space,
    cut to `limit` characters with "…" (hostile input; never rendered as HTML)."""
    text = _CONTROL.sub(" ", str(text or "")).strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def cause_of(message: str) -> str:
    """The admission cause a FailedCreate message names: PriorityClass, RuntimeClass, ResourceQuota,
    LimitRange, AdmissionWebhook, else Other."""
    for cause, pattern in CAUSES:
        if pattern.search(message or ""):
            return cause
    return "Other"


def refused(refusals: list[dict] | None, created: int, total: int) -> list[dict]:
    """PodCreateRefused facts from the owner Jobs' FailedCreate events, while fewer than `total` pods exist.

    `refusals`: event rows (`observe.events.row`) of reason FailedCreate, newest first. Returns at most
    MAX_REFUSALS facts {"code", "cause", "object", "count", "created", "total", "server_message", "message"}, one
    per distinct (object, cause), newest first.
    """
    if not refusals or created >= total:
        return []
    facts, seen = [], set()
    for r in refusals:
        said = quote(r.get("message"))
        cause, obj = cause_of(said), quote(r.get("object"), 300)
        if (obj, cause) in seen:
            continue
        seen.add((obj, cause))
        facts.append({"code": POD_CREATE_REFUSED, "cause": cause, "object": obj, "count": int(r.get("count") or 1),
                      "created": created, "total": total, "server_message": said,
                      "message": f"the cluster refuses to create the job's pods ({created} of {total} exist) "
                                 f"because of {CAUSE_WORDS[cause]}; {obj} says: {said}"})
        if len(facts) == MAX_REFUSALS:
            break
    return facts


def template_gates(resolved_spec: dict | None) -> set[str]:
    """Names of the scheduling gates the job's own pod templates carry (then the gate is the submitter's)."""
    out = set()
    for ps in (resolved_spec or {}).get("podSets") or []:
        spec = ((ps or {}).get("template") or {}).get("spec") or {} if isinstance(ps, dict) else {}
        for gate in spec.get("schedulingGates") or [] if isinstance(spec, dict) else []:
            if isinstance(gate, dict) and isinstance(gate.get("name"), str):
                out.add(gate["name"])
    return out


def gate_owner(name: str, from_template: set[str]) -> str:
    """Who a gate is from, as far as gangweb can tell: "the job's pod template" when the template carries it,
    else the domain its name is prefixed with (gates are named `<owner's domain>/<name>` by convention, e.g.
    `kueue.x-k8s.io/admission`), else ""."""
    if name in from_template:
        return "the job's pod template"
    prefix, slash, _ = name.partition("/")
    return prefix if slash and "." in prefix else ""


def foreign_gates(pods: list[PodFacts], from_template: set[str] | None = None) -> list[dict]:
    """ForeignSchedulingGate facts: for each gate on unbound live pods that gangweb did not add,
    {"code", "gate", "owner", "pods", "message"} (owner per `gate_owner`, "" when unknown), most pods first.
    `from_template`: `template_gates` of the job's resolved spec."""
    held: dict[str, int] = {}
    for p in pods:
        if p.terminating or p.bound:
            continue
        for name in p.scheduling_gates:
            if name not in GANGWEB_GATES:
                held[name] = held.get(name, 0) + 1
    facts = []
    for name, count in sorted(held.items(), key=lambda kv: (-kv[1], kv[0])):
        gate, owner = quote(name, 316), quote(gate_owner(name, from_template or set()), 253)
        whose = f"from {owner}" if owner else "owner unknown"
        facts.append({"code": FOREIGN_GATE, "gate": gate, "owner": owner, "pods": count,
                      "message": f"{count} pod{'' if count == 1 else 's'} held by scheduling gate `{gate}` "
                                 f"({whose}); gangweb did not add it and will not remove it: whoever added it "
                                 "must remove it"})
    return facts


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def silent_scheduler(scheduler: str, pods: list[PodFacts], now: datetime, window_s: float) -> list[dict]:
    """SchedulerSilent: the job's live pods all exist longer than `window_s` seconds and no scheduler has said
    anything about any of them (no PodScheduled condition, not bound; the caller checks the gang object said
    nothing either). {"code", "scheduler", "seconds", "pods", "message"}; [] otherwise."""
    live = [p for p in pods if not p.terminating]
    if not live or any(p.bound or p.waiting_reason for p in live):
        return []
    created = [p.created_at for p in live if p.created_at is not None]
    if not created or (now - max(created)).total_seconds() < window_s:
        return []
    who = quote(scheduler, 253) or "default-scheduler"
    return [{"code": SCHEDULER_SILENT, "scheduler": who, "seconds": int(window_s), "pods": len(live),
             "message": f"no scheduler named `{who}` has acted on these pods in {_duration(window_s)} — is it "
                        "running in this cluster?"}]


def queue_manager_absent(family: str, by: str, seen_at: datetime | None, cluster: str, now: datetime) -> list[dict]:
    """QueueManagerNotSeen: the queue manager that admits the job's gang before any pod exists (Kueue) was not
    seen acting on the cluster lately (observe/presence.py: its leader's Lease not renewed, e.g. the manager
    stopped or hung), so its last words on the gang object are as of then and nothing is admitted, evicted or
    released until it runs again. {"code", "family", "seen_at" (ISO or None), "message"}."""
    when = f"for {_duration((now - seen_at).total_seconds())} (last seen by {quote(by, 120)})" if seen_at else \
        "at all"
    return [{"code": QUEUE_MANAGER_NOT_SEEN, "family": family, "seen_at": seen_at.isoformat() if seen_at else None,
             "message": f"{family.capitalize()}'s manager has not been seen acting on cluster {quote(cluster, 63)} "
                        f"{when}: what it last said below is as of then, and nothing is admitted until it runs "
                        "again"}]


def node_span(names: list[str]) -> str:
    """Node names said briefly: "node-0..3" for consecutive numbered names of one prefix, else up to three names
    and how many more ("a, b, c and 4 more")."""
    names = sorted(names)
    matches = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if len(names) > 1 and all(matches) and len({m.group(1) for m in matches}) == 1:
        numbers = sorted(int(m.group(2)) for m in matches)
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{matches[0].group(1)}{numbers[0]}..{numbers[-1]}"
    shown = ", ".join(names[:3])
    return shown if len(names) <= 3 else f"{shown} and {len(names) - 3} more"
