"""GET and POST /api/v1/jobs/: list, detail, submit (single, bulk, idempotent), cancel, resubmit, edit, wait, timeline,
events, logs, estimate.
"""
import time

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...db import keyset, related
from ...filtersets import GangJobFilterSet
from ...kube import errors as kube_errors
from ...models import BulkSubmitKey, GangJob, PhaseTransition
from ...models.jobs import IN_PHASE_SINCE
from ...observe import timeline
from ...services.access import roles as access
from ...services.jobs import bulk_cancel
from ...services.jobs import events as event_service
from ...services.jobs import lifecycle as job_service
from ...services.jobs import lists as job_list
from ...services.jobs import logs as job_logs
from ...services.jobs import start_estimate as estimate_service
from ...services.jobs import wait as job_wait
from .. import job_serializers as js
from .. import preferences
from .. import serializers as s
from ..pagination import JobListPagination
from ..throttling import SUBMIT_THROTTLES, BulkJobsQuota
from .common import IDEMPOTENCY_HEADER, REPLAYED_HEADER, int_param

TIMELINE_PAGE_MAX = 1000  # entries per page of GET /api/v1/jobs/<id>/timeline/?limit=

class GangJobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Gang jobs: submit, bulk submit, list, retrieve (with timeline), update queue/priority, cancel, resubmit."""

    filterset_class = GangJobFilterSet
    pagination_class = JobListPagination  # keyset pages; `offset` still pages the old way (api/pagination.py)
    submit_actions = ("create", "bulk", "resubmit")
    ordering_fields = ["created_at", "phase_changed_at", "name", "phase"]
    search_fields = ["name", "namespace"]

    def _base_queryset(self):
        if self.action == "list":
            # JSON the list form never shows: not fetched, not decoded 50 times a page. The relations' names by a
            # lookup per row shown, not joins: joins planned from stale statistics scanned whole tables per job
            # (db/related.py, issue 14).
            return related.annotate(GangJob.objects.defer("resolved_spec", "observed"),
                                    related.JOB_LIST_RELATED).annotate(in_phase_since=IN_PHASE_SINCE)
        # The queue's parent too: a pending job's position names it (services/queues/line.py).
        qs = GangJob.objects.select_related("template_version__template", "queue__parent", "cluster", "submitted_by")
        if self.action == "retrieve":
            qs = qs.prefetch_related(Prefetch("transitions", queryset=PhaseTransition.objects.order_by("at", "id")))
        return qs

    def get_queryset(self):
        return access.visible_jobs(self.request.user, self._base_queryset())

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None and self.action == "list":
            page = related.attach(page, related.JOB_LIST_RELATED)
        return page

    def filter_queryset(self, queryset):
        """The filters, search and `ordering`, then `?group=` (validated by the FilterSet) in front of the order:
        each group's jobs come together, in the order asked within it (services/jobs/lists.py); `id` breaks ties,
        in the direction of the last key."""
        queryset = super().filter_queryset(queryset)
        group = self.request.query_params.get("group") if self.action == "list" else None
        if group in job_list.GROUPS:
            queryset = job_list.ordered(queryset, group, queryset.query.order_by or GangJob._meta.ordering)
        if self.action == "list":
            # `ordering=phase_changed_at` sorts by when the current phase began (the index job_in_phase_since; the
            # same order but for jobs with no change recorded), and `id` comes last, as keyset pages order.
            order = [t.replace("phase_changed_at", "in_phase_since") for t in queryset.query.order_by]
            queryset = queryset.order_by(*keyset.order_by(keyset.keys_of(queryset, order or None)))
        return queryset

    def get_throttles(self):
        if self.action in self.submit_actions:
            return [throttle() for throttle in SUBMIT_THROTTLES]
        return super().get_throttles()

    def get_serializer_class(self):
        return js.GangJobDetailSerializer if self.action != "list" else js.GangJobSerializer

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["with_position"] = self.action == "retrieve"  # reads only: see GangJobDetailSerializer.position
        return context

    def _detail(self, job, code):
        # The service just authorised this write, so echo the job back even to a token without "read".
        job = self._base_queryset().prefetch_related("transitions").get(pk=job.pk)
        return Response(js.GangJobDetailSerializer(job).data, status=code)

    @extend_schema(request=js.JobSubmitSerializer, responses={201: js.GangJobDetailSerializer},
                   parameters=[IDEMPOTENCY_HEADER])
    def create(self, request):
        """Submit a job. With an Idempotency-Key that repeats, answers with the first job, 201 as the first time,
        and `Idempotent-Replayed: true`."""
        job, created = job_service.submit(request.user, request.data, request.headers.get("Idempotency-Key"))
        if created:  # the service returns it with its relations and timeline loaded: no re-read
            response = Response(s.represent(js.GangJobDetailSerializer, job), status=status.HTTP_201_CREATED)
        else:
            response = self._detail(job, status.HTTP_201_CREATED)
            response[REPLAYED_HEADER] = "true"
        # Queue-limit warnings from submit (services.queues.policies.check_job_limits), e.g. the queue is full for now.
        response.data["warnings"] = getattr(job, "submit_warnings", [])
        return response

    @extend_schema(request=js.JobUpdateSerializer, responses=js.GangJobDetailSerializer)
    def partial_update(self, request, pk=None):
        """Change a job's queue or priority class; the gang object follows."""
        job = job_service.update(request.user, self.get_object(), request.data)
        return self._detail(job, status.HTTP_200_OK)

    @extend_schema(request=js.BulkSubmitSerializer, parameters=[IDEMPOTENCY_HEADER, preferences.PREFER_HEADER],
                   responses={
        201: PolymorphicProxySerializer(
            component_name="BulkSubmitResponse", resource_type_field_name=None,
            serializers=[js.BulkSubmitResultSerializer, js.BulkSubmitMinimalResultSerializer])})
    @action(detail=False, methods=["post"])
    def bulk(self, request):
        """Submit many jobs in one request: all are created, or none (errors keyed jobs[i].field). Answers every
        job in its list form, or only its id, uid and name with `Prefer: return=minimal`. With an Idempotency-Key
        that repeats, answers with the first request's jobs (201, `Idempotent-Replayed: true`), creating none."""
        body = request.data
        unknown = sorted(set(body) - {"jobs"}) if isinstance(body, dict) else []
        if unknown:
            raise DjangoValidationError({unknown[0]: 'unknown field; the body is {"jobs": [...]}'})
        items = body.get("jobs") if isinstance(body, dict) else None
        minimal = preferences.wants_minimal(request)
        quota = BulkJobsQuota(request)  # jobs per minute per user (429); refunded when nothing is created
        key = request.headers.get("Idempotency-Key")
        replay = bool(key) and quota.limit is not None and BulkSubmitKey.objects.filter(
            submitted_by=request.user, idempotency_key=key).exists()  # creates nothing: costs nothing
        quota.charge(len(items) if isinstance(items, list) and len(items) <= job_service.MAX_BULK and not replay
                     else 0)
        try:
            # In request order, relations loaded (new or replayed): no re-read.
            created, new = job_service.submit_bulk(request.user, items, key)
        except BaseException:
            quota.refund()
            raise
        if not new:
            quota.refund()
        serializer = js.JobRefSerializer if minimal else js.GangJobSerializer
        jobs = s.represent(serializer, created, many=True)
        response = Response({"count": len(created), "jobs": jobs}, status=status.HTTP_201_CREATED)
        if not new:
            response[REPLAYED_HEADER] = "true"
        return preferences.applied(response, minimal)

    @extend_schema(parameters=[OpenApiParameter("group", str, required=True, enum=list(job_list.GROUPS),
                                                description="count the jobs by queue, cluster or phase")],
                   responses={200: dict})
    @action(detail=False, methods=["get"])
    def groups(self, request):
        """How many jobs (visible to you, matching the list's filters) each queue, cluster or phase has:
        ``{"group": "queue", "groups": [{"key": "team-a", "count": 12}]}``, in the order `GET /api/v1/jobs/?group=`
        lists them (names alphabetically, phases in lifecycle order)."""
        group = request.query_params.get("group")
        if group not in job_list.GROUPS:
            raise DjangoValidationError({"group": f"'{str(group)[:20]}' is not one of "
                                                  f"{', '.join(job_list.GROUPS)}" if group else
                                                  f"required: one of {', '.join(job_list.GROUPS)}"})
        queryset = super().filter_queryset(self.get_queryset())
        return Response({"group": group, "groups": job_list.group_counts(queryset, group)})

    @extend_schema(request=js.BulkCancelSerializer, responses={200: js.BulkCancelResultSerializer},
                   operation_id="v1_jobs_cancel_many")
    @action(detail=False, methods=["post"], url_path="cancel")
    def cancel_many(self, request):
        """Cancel several jobs: ``{"ids": [12, 13]}`` (1 to 500, none repeated; 400 naming `ids` or `ids[i]`
        otherwise, and nothing is cancelled). Each job is cancelled as POST /api/v1/jobs/<id>/cancel/ would,
        checked on its own: the answer lists every id with `cancelled` and, when refused, the `status` the single
        cancel would have answered (403, 404, 409) and the `reason`; a refused job is left as it was."""
        ids = bulk_cancel.parse_body(request.data)
        return Response(bulk_cancel.payload(bulk_cancel.cancel_many(request.user, ids)))

    @extend_schema(request=None, responses=js.GangJobDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel: delete the job's cluster objects; the job ends Cancelled."""
        job = job_service.cancel(request.user, self.get_object())
        return self._detail(job, status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={201: js.GangJobDetailSerializer})
    @action(detail=True, methods=["post"])
    def resubmit(self, request, pk=None):
        """Submit a finished job again, as a new job with the same inputs. It takes no body: a field sent would be
        ignored, so it is a 400 naming it (submit a new job to change inputs)."""
        if isinstance(request.data, dict) and request.data:
            raise DjangoValidationError({sorted(request.data)[0]: "unknown field; resubmit takes no body: it asks "
                                                                  "again for the same inputs (submit a new job to "
                                                                  "change them)"})
        job = job_service.resubmit(request.user, self.get_object())
        return self._detail(job, status.HTTP_201_CREATED)

    @extend_schema(responses=js.PhaseTransitionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def timeline(self, request, pk=None):
        """The job's phase history, in order, every entry (unfolded). Paged with `?offset=` (0 or more) and
        `?limit=` (1 to TIMELINE_PAGE_MAX): the answer is then that slice, with `X-Total-Count` and, when more
        follow, a `Link: <...>; rel="next"` header. Without them, every entry (as before paging existed)."""
        job = self.get_object()
        paged = "limit" in request.query_params or "offset" in request.query_params
        offset = limit = None
        if paged:
            errors = {}
            offset = int_param(request, "offset", 0, 0, None, errors)
            limit = int_param(request, "limit", TIMELINE_PAGE_MAX, 1, TIMELINE_PAGE_MAX, errors)
            if errors:
                raise DjangoValidationError(errors)
        entries = timeline.annotate(job.transitions.all(), timezone.now())
        if not paged:
            return Response(js.PhaseTransitionSerializer(entries, many=True).data)
        page = entries[offset:offset + limit]
        response = Response(js.PhaseTransitionSerializer(page, many=True).data)
        response["X-Total-Count"] = str(len(entries))
        if offset + limit < len(entries):
            nxt = request.build_absolute_uri(f"{request.path}?offset={offset + limit}&limit={limit}")
            response["Link"] = f'<{nxt}>; rel="next"'
        return response

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def estimate(self, request, pk=None):
        """When the pending job would start (services/jobs/start_estimate.py): p50 and p90 times with the evidence, or
        why it is unknown. A job that is not pending answers ``{"status": "not_pending", "phase": ...}``. Computed
        on read and reused up to 15 s while the cluster's jobs are unchanged: it moves as soon as a job of the
        cluster ends or starts (`computed_at` says when it was computed)."""
        job = self.get_object()
        found = estimate_service.payload(job, request.user)
        if found is None:
            found = {"status": "not_pending", "phase": job.phase,
                     "text": f"the job is {job.phase}{' and being cancelled' if job.desired_state == 'Cancel' else ''}"
                             ": it is not waiting to start"}
        return Response({"job": job.pk, "name": job.name, "queue": job.queue.name, **found})

    def _wait_read(self, ids: list[int]) -> list[GangJob]:
        """The visible jobs among `ids`, in that order, with queue, cluster and timeline: two queries."""
        rows = access.visible_jobs(self.request.user, GangJob.objects.filter(pk__in=ids)).select_related(
            "queue", "cluster").only(
            *(f for f in js.JobWaitStateSerializer.Meta.fields
              if f not in ("queue", "cluster", "terminal", "timeline", "timeline_total")),
            "queue__name", "cluster__name").prefetch_related(
            Prefetch("transitions", queryset=PhaseTransition.objects.order_by("at", "id")))
        by_id = {job.pk: job for job in rows}
        return [by_id[i] for i in ids if i in by_id]

    @extend_schema(parameters=[
        OpenApiParameter("ids", str, required=True, description=f"job ids, comma-separated (at most "
                                                                f"{job_wait.MAX_IDS})"),
        OpenApiParameter("after", str, description="the `cursor` of a previous answer: wait until the jobs "
                                                   "differ from it; empty = answer at once"),
        OpenApiParameter("timeout", float, description=f"seconds to wait at most, 0 to "
                                                       f"{job_wait.MAX_TIMEOUT_SECONDS:g} (default "
                                                       f"{job_wait.DEFAULT_TIMEOUT_SECONDS:g})"),
    ], responses=js.JobWaitSerializer)
    @action(detail=False, methods=["get"])
    def wait(self, request):
        """Long-poll: answer as soon as any named job changes phase (a new timeline entry) after `after`, at
        once when nothing can change (every job terminal, or none visible), else at `timeout`. The answer is the
        current state of every job named, never a history: a client is done when `all_terminal` is true.

        A waiting request holds a web thread but no database connection; each web process reads the jobs all its
        waiters wait on in one query per `GANGWEB_WAIT_POLL_SECONDS` (services/jobs/wait.py). Ids of jobs you
        cannot see are listed in `missing`, as a 404 would answer them."""
        params = request.query_params
        ids = job_wait.parse_ids(params.get("ids"))
        timeout = job_wait.parse_timeout(params.get("timeout"))
        after = (params.get("after") or "")[:64]
        deadline = time.monotonic() + timeout
        jobs = self._wait_read(ids)
        cursor = job_wait.cursor_of((j.pk, j.phase, len(j.transitions.all())) for j in jobs)
        timed_out = False
        if cursor == after and jobs and not all(j.is_terminal for j in jobs):
            try:
                with job_wait.wait_slot(request.user.pk):  # per user, whichever token or session asks
                    while cursor == after and jobs and not all(j.is_terminal for j in jobs):
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            timed_out = True
                            break
                        job_wait.wait_for_change([j.pk for j in jobs], cursor, remaining)
                        jobs = self._wait_read(ids)  # judged on the rows as they are now, whatever woke us
                        cursor = job_wait.cursor_of((j.pk, j.phase, len(j.transitions.all())) for j in jobs)
            except job_wait.TooManyWaits as exc:
                return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS,
                                headers={"Retry-After": "2"})
        found = {j.pk for j in jobs}
        return Response({"cursor": cursor, "changed": cursor != after, "timed_out": timed_out,
                         "all_terminal": all(j.is_terminal for j in jobs),
                         "jobs": js.JobWaitStateSerializer(jobs, many=True).data,
                         "missing": [i for i in ids if i not in found]})

    @extend_schema(responses={200: js.JobEventsSerializer, 502: js.JobEventsSerializer})
    @action(detail=True, methods=["get"])
    def events(self, request, pk=None):
        """The Kubernetes Events of the job's gang objects, Jobs and pods, read live from its cluster (oldest
        first). 502 with `error` when the cluster cannot be asked."""
        job = self.get_object()
        try:
            rows = event_service.job_events(job)
        except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is reported, not raised
            # What any viewer of the job may read: never a token, a response body or a file's content.
            return Response({"cluster": job.cluster.name, "events": [], "error": kube_errors.describe(exc)},
                            status=status.HTTP_502_BAD_GATEWAY)
        return Response({"cluster": job.cluster.name, "events": rows, "error": None})

    @extend_schema(parameters=[js.JobLogQuerySerializer], responses={
        (200, "text/plain"): OpenApiTypes.STR, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT,
        409: OpenApiTypes.OBJECT, 502: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        """A container's log, read live from the job's cluster (services/jobs/logs.py), as text/plain. Only the
        job's own pods (controller reference to a Job UID gangweb recorded) in its namespace; 404 to whoever may not
        view the job. At most GANGWEB_LOG_MAX_BYTES bytes: a longer log is cut, with the header
        `X-Gangweb-Log-Truncated: true` and a last line saying so. `follow=true` streams new lines for
        GANGWEB_LOG_FOLLOW_SECONDS at most. Headers `X-Gangweb-Log-Pod`, `-Container`, `-Pod-Set`, `-Index` name
        what was read. 404 when no pod matches (naming the parameter), 409 when the cluster refuses (a container
        not started yet, no previous container), 502 when it cannot be asked."""
        job = self.get_object()  # the job detail's access check: 404 to others
        params = js.JobLogQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = job_logs.LogQuery(**params.validated_data)
        try:
            found = job_logs.read(job, query)
        except job_logs.LogTargetError as exc:
            return Response({exc.field: [exc.message]}, status=exc.status)
        except Exception as exc:  # noqa: BLE001 - any cluster failure is an answer, never a 500
            said = kube_errors.classify(exc)
            code = (status.HTTP_409_CONFLICT if said is not None and said.status in (400, 404)
                    else status.HTTP_502_BAD_GATEWAY)
            return Response({"cluster": job.cluster.name, "error": kube_errors.describe(exc)}, status=code)
        if found.chunks is not None:
            answer = StreamingHttpResponse(found.chunks, content_type="text/plain; charset=utf-8")
            answer["X-Accel-Buffering"] = "no"  # a proxy passes lines on as they come
        else:
            body = found.body + (job_logs.cut_notice(job_logs.max_bytes()) if found.truncated else b"")
            answer = HttpResponse(body, content_type="text/plain; charset=utf-8")
            if found.truncated:
                answer["X-Gangweb-Log-Truncated"] = "true"
        for header, value in (("Pod", found.pod), ("Container", found.container), ("Pod-Set", found.pod_set),
                              ("Index", "" if found.index is None else str(found.index))):
            answer[f"X-Gangweb-Log-{header}"] = job_logs.header_value(value)
        return answer
