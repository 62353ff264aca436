"""Jobs: the filtered, sorted, paginated list; the job page with its live part; cancel and resubmit."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import F
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from ..choices import PHASE_FILTER_CHOICES, DesiredState
from ..db import keyset, related
from ..filtersets import GangJobFilterSet
from ..forms.errors import error_items
from ..kube import errors as kube_errors
from ..kube import runtime_classes
from ..models import Cluster, GangJob, QueuePolicy, ReconcileAttempt
from ..models.jobs import IN_PHASE_SINCE
from ..observe import timeline
from ..services.access import roles as access
from ..services.errors import ServiceError
from ..services.jobs import events as event_service
from ..services.jobs import lifecycle as job_service
from ..services.jobs import lists as list_service
from ..services.jobs import logs as log_service
from ..services.jobs import start_estimate as estimate_service
from ..services.queues import line as queue_line
from .common import is_htmx, page_or_fragment
from .display import bounded as bounded_gantt
from .display import gantt, pods_of_spec, requests_of_spec
from .objects import objects_sent
from .why_pending import explain

PAGE_SIZE = 50
# ?sort= value -> ORDER BY; a stable tie-breaker keeps pages from overlapping. The tie-breaker runs the same way as
# the key, so one index on (key, id) read forwards or backwards serves both directions and every keyset page
# (migration 0019).
SORTS = {
    "created": ("-created_at", "-id"), "-created": ("created_at", "id"),
    "name": ("name", "id"), "-name": ("-name", "-id"),
    "phase": ("phase", "id"), "-phase": ("-phase", "-id"),
    # Time in the current phase: ascending is the shortest first (the latest change first).
    "in_phase": ("-in_phase_since", "-id"), "-in_phase": ("in_phase_since", "id"),
    # By the queue's name through a join (annotated only for this sort): PostgreSQL reads the queues in name order
    # and each one's jobs from job_queue_created; a lookup per row would be computed for every job to sort them.
    "queue": ("sort_queue_name", "id"), "-queue": ("-sort_queue_name", "-id"),
}
SORT_ANNOTATIONS = {"queue": {"sort_queue_name": F("queue__name")}, "in_phase": {"in_phase_since": IN_PHASE_SINCE}}
# Keys whose unprefixed order runs down their column's values (newest submit first): the arrow says so.
DESCENDING_KEYS = {"created"}
SORT_COLUMNS = [("name", "Job"), ("phase", "Phase"), ("in_phase", "In phase"), ("queue", "Queue"),
                ("created", "Submitted")]
# The queue's parent too: a pending job's place in line names it (services/queues/line.py).
RELATED = ("template_version__template", "queue__parent", "cluster", "submitted_by")
# What the list shows: the jobs' and their relations' JSON (specs, observed state, cluster credentials) is not
# fetched nor decoded 50 times a page (bench/: most of the list's time at 100,000 jobs). The relations' names come
# by a lookup per row shown (related.JOB_LIST_RELATED), not joins: joins planned from stale statistics scanned
# whole tables per job (issue 14).
LIST_FIELDS = ("id", "name", "namespace", "phase", "desired_state", "phase_reason", "phase_changed_at", "created_at",
               "queue", "cluster", "template_version", "submitted_by", "requested_gpu")


COUNT_CAP = 10_000


@dataclass
class JobPage:
    """What the table shows of one keyset page (db/keyset.py): its jobs, how many match (exact up to
    COUNT_CAP; `capped` when more do) and the query strings of the first, previous, next and last pages ("" where
    there is none). No page numbers: a page is "the 50 jobs after this one", so page 5,000 costs what page 1 does,
    and a list that changes every second has no stable page number anyway."""

    object_list: list
    count: int
    capped: bool
    first: str = ""
    previous: str = ""
    next: str = ""
    last: str = ""

    @property
    def has_other_pages(self) -> bool:
        return bool(self.first or self.previous or self.next or self.last)


def _page(qs, request, query) -> JobPage:
    """The keyset page of `qs` that `?cursor=` names (the first without one); a cursor that does not fit (another
    sort, edited by hand) shows the first page."""
    try:
        kpage = keyset.page(qs, PAGE_SIZE, request.GET.get("cursor"))
    except ValueError:
        kpage = keyset.page(qs, PAGE_SIZE, None)
    count, capped = keyset.capped_count(qs, COUNT_CAP)

    def link(cursor):
        if cursor is None:
            return ""
        q = query.copy()
        q["cursor"] = cursor
        return q.urlencode()

    return JobPage(kpage.rows, count, capped, first=(query.urlencode() or "cursor=") if kpage.previous else "",
                   previous=link(kpage.previous), next=link(kpage.next), last=link(kpage.last))


def _jobs(user):
    return access.visible_jobs(user, GangJob.objects.select_related(*RELATED))


@login_required
def job_list(request):
    """GET /jobs/: filters (the API's GangJobFilterSet), search, sorting, grouping (`?group=queue|cluster|phase`,
    services/jobs/lists.py, as the API's) and pagination; htmx polls the table. Each row shows the GPUs its gang asks
    for and, while pending, why it waits; ticked rows are cancelled together (`jobs_cancel`).

    Keyset pages (`?cursor=`, db/keyset.py): First, Previous, Next and Last, no page numbers. Four queries
    whatever the number of jobs and however deep the page (count, capped at COUNT_CAP; page; queue names; cluster
    names), and with a group two more (the jobs per group and their names; none when the count is capped).
    """
    jobs = related.annotate(access.visible_jobs(request.user, GangJob.objects.only(*LIST_FIELDS)),
                            related.JOB_LIST_RELATED)
    sort = request.GET.get("sort", "created")
    if sort not in SORTS:
        sort = "created"
    jobs = jobs.annotate(**SORT_ANNOTATIONS.get(sort.lstrip("-"), {}))
    filterset = GangJobFilterSet(request.GET or None, queryset=list_service.with_waiting_fields(jobs))
    group = request.GET.get("group") if request.GET.get("group") in list_service.GROUPS else ""
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("cursor", None)
    page = _page(list_service.ordered(filterset.qs, group, SORTS[sort]), request, query)
    page.object_list = related.attach(page.object_list, related.JOB_LIST_RELATED)
    counts = {}
    if group and page.object_list and not page.capped:
        counts = {g["key"]: g["count"] for g in list_service.group_counts(filterset.qs, group)}
    for job in page.object_list:
        job.group_key = list_service.group_key(job, group) if group else ""
        job.waiting = list_service.waiting_reason(job)
        job.cancellable = not job.is_terminal and job.desired_state != DesiredState.CANCEL
    sort_links = []
    for key, label in SORT_COLUMNS:
        q = query.copy()
        q["sort"] = f"-{key}" if sort == key else key
        sort_links.append({"key": key, "label": label, "query": q.urlencode(),
                           "active": sort.lstrip("-") == key,
                           "desc": sort.startswith("-") != (key in DESCENDING_KEYS)})
    return page_or_fragment(request, "scheduling/jobs.html", "scheduling/partials/job_table.html", {
        "section": "jobs", "filterset": filterset, "page": page, "sort": sort, "sort_links": sort_links,
        "query": query.urlencode(), "phases": PHASE_FILTER_CHOICES, "selected_phases": request.GET.getlist("phase"),
        # Looked up once here: `request.GET.queue` in the template costs a dir(request) per option (1,000 queues).
        "selected_queue": request.GET.get("queue", ""), "selected_cluster": request.GET.get("cluster", ""),
        "queue_names": list(access.visible_queues(request.user, QueuePolicy.objects.all()).values_list("name",
                                                                                                      flat=True)),
        "cluster_names": list(access.visible_clusters(request.user, Cluster.objects.all()).values_list("name",
                                                                                                        flat=True)),
        "group": group, "groups": list_service.GROUP_CHOICES, "group_counts": counts,
        "group_label": list_service.GROUPS.get(group, ""), "now": timezone.now(),
        "search_name": request.GET.get("q") or request.GET.get("name") or "",
    })


DURATION_LABELS = [("time_in_queue", "Time in queue"), ("time_to_schedule", "Time to schedule"),
                   ("time_to_running", "Time to running"), ("run_time", "Run time")]


_COUNT_ORDER = ("created", "bound", "running", "succeeded", "failed")


def _counts(counts) -> dict:
    """The pod counts by phase for the Pods heading, in the pods' life order (created, bound, running, succeeded,
    failed; any other number after them): numbers only (the per-set list is shown apart). The order is fixed here
    because PostgreSQL's jsonb does not keep a stored object's key order."""
    if not isinstance(counts, dict):
        return {}
    keys = [k for k in _COUNT_ORDER if k in counts] + sorted(k for k in counts if k not in _COUNT_ORDER)
    return {k: counts[k] for k in keys if isinstance(counts[k], int) and not isinstance(counts[k], bool)}


def job_live_context(job, user=None) -> dict:
    """The parts of the job page that change while it runs: phase, timeline, why-pending, pods, events; for a
    pending job its place in line and start-time estimate (`user`: the reader, whose invisible jobs the estimate
    does not name)."""
    transitions = list(job.transitions.all())
    observed = job.observed or {}
    pods = observed.get("pods") or []
    counts = observed.get("pod_counts") or (pods if isinstance(pods, dict) else {})
    counts = counts if isinstance(counts, dict) else {}
    foreign = observed.get("foreign") or []
    now = timezone.now()
    return {
        "job": job,
        "gantt": bounded_gantt(gantt(transitions, now)),
        # The API's derived durations: {"duration_s", "ongoing"} or None; an ongoing one counts until now.
        "durations": timeline.spans(transitions, now),
        "duration_labels": DURATION_LABELS,
        "requeues": timeline.requeues(transitions),
        "transitions": transitions,
        "why": explain(job.why_pending, job.phase),
        # The first failure of its containers, pods and Jobs (observe/failure.py; the API's `failure`), or None.
        "failure": observed.get("failure") if isinstance(observed.get("failure"), dict) else None,
        # Pod rows [{"name", "node", "phase", "reason"}] as the observer records them (first 200 by name), and
        # counts by pod phase (older passes stored only the counts, under "pods").
        "pods": [p for p in pods if isinstance(p, dict)] if isinstance(pods, list) else [],
        "pod_counts": _counts(counts),
        # Per pod set that states a minimum: [{"name", "replicas", "minimum", "bound"}] (docs/backends.md).
        "pod_set_counts": [c for c in counts.get("sets") or [] if isinstance(c, dict)],
        # Where the pods seen and the Job controller's own counts disagree (observe/pods.py `cross_check`), and the
        # objects claiming the job's that are not gangweb's (reconcile/ownership.py): said, never acted on.
        "count_note": counts.get("note") if isinstance(counts.get("note"), str) else "",
        "foreign": [f for f in foreign if isinstance(f, dict)] if isinstance(foreign, list) else [],
        "attempts": list(ReconcileAttempt.objects.filter(job=job).order_by("-started_at", "-id")[:8]),
        # A pending job's place in line (services/queues/line.py, as the API's `position`): one query, none otherwise.
        "position": queue_line.position(job),
        # Its start-time estimate (services/jobs/start_estimate.py, as the API's `estimated_start`): one query for the
        # cluster's state version and, unless cached (15 s while that is unchanged), four more; none when not pending.
        "estimate": estimate_service.payload(job, user, now),
        "can_cancel": not job.is_terminal and job.desired_state != "Cancel",
        "can_resubmit": job.is_terminal,
    }


@login_required
def job_detail(request, pk: int):
    """GET /jobs/<id>/: everything about one job; the live part is polled every 2 s while it is active."""
    job = get_object_or_404(_jobs(request.user).select_related("resubmitted_from"), pk=pk)
    context = job_live_context(job, request.user)
    context.update({
        "section": "jobs",
        "asks": requests_of_spec(job.resolved_spec, runtime_classes.for_job(job)),
        "pod_count": pods_of_spec(job.resolved_spec),
        "objects": objects_sent(job),
    })
    return render(request, "scheduling/job_detail.html", context)


@login_required
def job_objects(request, pk: int):
    """GET /jobs/<id>/objects/ (htmx): the objects sent to the cluster. The page polls it only until there are
    some, so expanding one is never undone by a refresh."""
    job = get_object_or_404(_jobs(request.user), pk=pk)
    return render(request, "scheduling/partials/job_objects.html", {"job": job, "objects": objects_sent(job)})


@login_required
def job_live(request, pk: int):
    """GET /jobs/<id>/live/: the live fragment alone (htmx). Once the job is finished it stops polling."""
    job = get_object_or_404(_jobs(request.user), pk=pk)
    return render(request, "scheduling/partials/job_live.html", job_live_context(job, request.user))


@login_required
def job_events(request, pk: int):
    """GET /jobs/<id>/events/: the Kubernetes Events of the job's objects, read live from its cluster
    (`services.jobs.events.job_events`, as GET /api/v1/jobs/<id>/events/). htmx loads it into the job page and
    refreshes it every 10 s; without JavaScript the page links to it."""
    job = get_object_or_404(_jobs(request.user).select_related("cluster"), pk=pk)
    events, error = [], ""
    try:
        events = event_service.job_events(job)
    except Exception as exc:  # noqa: BLE001 - any cluster failure is shown, never a 500 on the job page
        error = f"Could not read events from cluster '{job.cluster.name}': {kube_errors.describe(exc, 300)}"
    context = {"job": job, "events": events[-50:][::-1], "error": error}
    if is_htmx(request):
        return render(request, "scheduling/partials/job_events.html", context)
    return render(request, "scheduling/job_events.html", {**context, "section": "jobs"})


PANEL_TAIL_LINES = 200


def _small_int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 8 else None


@login_required
def job_logs(request, pk: int):
    """GET /jobs/<id>/logs/ (htmx): the last PANEL_TAIL_LINES lines of a container's log, read live from the job's
    cluster (`services.jobs.logs`, as GET /api/v1/jobs/<id>/logs/: the failed container by default; `pod_set`,
    `index`, `container` choose another). The page refreshes it every 5 s while the job runs."""
    job = get_object_or_404(_jobs(request.user).select_related("cluster"), pk=pk)
    query = log_service.LogQuery(pod_set=(request.GET.get("pod_set") or "")[:63],
                                 index=_small_int(request.GET.get("index")),
                                 container=(request.GET.get("container") or "")[:63], tail_lines=PANEL_TAIL_LINES)
    context = {"job": job, "tail": PANEL_TAIL_LINES, "found": None, "text": "", "error": ""}
    try:
        found = log_service.read(job, query)
        context.update(found=found, text=found.body.decode("utf-8", "replace"))
    except log_service.LogTargetError as exc:
        context["error"] = exc.message
    except Exception as exc:  # noqa: BLE001 - any cluster failure is shown, never a 500 on the job page
        context["error"] = f"Could not read the log from cluster '{job.cluster.name}': {kube_errors.describe(exc, 300)}"
    return render(request, "scheduling/partials/job_logs.html", context)


def _act(request, pk: int, action, done: str):
    job = get_object_or_404(_jobs(request.user), pk=pk)
    try:
        result = action(request.user, job)
    except (ServiceError, ValidationError) as exc:
        for path, message in error_items(exc):
            messages.error(request, f"{message}" if path in ("", "detail", "phase") else f"{path}: {message}")
        return redirect("scheduling:job", pk=job.pk)
    messages.success(request, done.format(job=result))
    return redirect("scheduling:job", pk=result.pk)


@login_required
@require_POST
def job_cancel(request, pk: int):
    """POST /jobs/<id>/cancel/: services.jobs.lifecycle.cancel, as the API's POST /api/v1/jobs/<id>/cancel/."""
    return _act(request, pk, job_service.cancel, "Cancellation requested for {job}.")


@login_required
@require_POST
def job_resubmit(request, pk: int):
    """POST /jobs/<id>/resubmit/: services.jobs.lifecycle.resubmit; redirects to the new job."""
    return _act(request, pk, job_service.resubmit, "Resubmitted as a new job {job}.")


