"""API viewsets, mounted at /api/v1/. Each write calls a scheduling.services function."""
import time

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ..filtersets import (
    AuditEventFilterSet,
    ClusterFilterSet,
    GangJobFilterSet,
    QueuePolicyFilterSet,
    RuntimeTemplateFilterSet,
)
from ..kube import errors as kube_errors
from ..kube.kai_units import UNITS
from ..models import (
    ApiToken,
    AuditEvent,
    BulkSubmitKey,
    Cluster,
    GangJob,
    PhaseTransition,
    QueueClusterState,
    QueuePolicy,
    QueueUsageSample,
    RuntimeTemplate,
    RuntimeTemplateVersion,
    VolcanoQueueState,
    WebhookSubscription,
)
from ..models.jobs import IN_PHASE_SINCE
from ..services import (
    access,
    audit,
    bulk_cancel,
    cluster_capacity,
    dispatch,
    job_list,
    job_logs,
    job_wait,
    keyset,
    notifications,
    policy,
    queue_counts,
    queue_line,
    related,
    timeline,
)
from ..services import clusters as cluster_service
from ..services import events as event_service
from ..services import fair_share as fair_share_service
from ..services import jobs as job_service
from ..services import queues as queue_service
from ..services import start_estimate as estimate_service
from ..services import templates as template_service
from ..services import tokens as token_service
from ..services import validation as v
from ..services.errors import PermissionDenied
from . import preferences
from . import serializers as s
from .pagination import JobListPagination
from .permissions import IsPlatformAdmin, NotWithToken
from .throttling import SUBMIT_THROTTLES, BulkJobsQuota

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="Retry a submit safely (draft-ietf-httpapi-idempotency-key-header; at most 255 characters, unique "
                "per user across single and bulk submits). A request repeating a key answers with what the first one "
                "created (same job ids, same 201) and `Idempotent-Replayed: true`, and creates nothing; the same key "
                "with a different body (or first used on the other submit endpoint) is 422 naming `Idempotency-Key`. "
                "A request that failed stores no key.")
REPLAYED_HEADER = "Idempotent-Replayed"  # as Stripe: this answer repeats the first request's, nothing was created


def _changes(instance, validated_data: dict) -> dict:
    """{field: new value} for the validated fields that differ from `instance` (M2M compared by primary keys)."""
    changed = {}
    for name, value in validated_data.items():
        current = getattr(instance, name, None)
        if hasattr(current, "all"):  # a many-to-many manager
            if {o.pk for o in current.all()} != {o.pk for o in value}:
                changed[name] = sorted(str(o) for o in value)
        elif current != value:
            changed[name] = _plain(value)
    return changed



TIMELINE_PAGE_MAX = 1000  # entries per page of GET /api/v1/jobs/<id>/timeline/?limit=


def _int_param(request, name: str, default: int, low: int, high: int | None, errors: dict) -> int:
    """Query parameter `name` as an int in [low, high] (`high` None: no upper bound), else `default` when absent;
    a bad value is added to `errors` as {name: reason}."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        errors[name] = "A valid integer is required."
        return default
    if value < low or (high is not None and value > high):
        errors[name] = f"must be {low} or more" + (f" and at most {high}" if high is not None else "")
    return value

class VisibleObjectMixin:
    """Lists show what services/access.py lets the user see; a named object that exists but is not visible is 404,
    as one that does not exist (`check_read_*` raises access's NotFound)."""

    visible = None  # access.visible_* function
    check_read = None  # access.check_read_* function

    def base_queryset(self):
        """Every object, before visibility filtering."""
        return self.queryset.all()

    def get_queryset(self):
        return type(self).visible(self.request.user, self.base_queryset())

    def get_object(self):
        queryset = self.filter_queryset(self.base_queryset())
        lookup = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        obj = get_object_or_404(queryset, **{self.lookup_field: lookup})
        type(self).check_read(self.request.user, obj)
        self.check_object_permissions(self.request, obj)
        return obj


class ClusterViewSet(VisibleObjectMixin, viewsets.ModelViewSet):
    """Clusters gangweb reconciles into. Credentials are write-only: never returned after upload.

    Registering and deleting clusters is for platform admins; cluster admins may change one (credentials too),
    but not its `name` or `in_cluster` (403 naming the field). Kubeconfigs follow docs/security.md (400 naming the
    offending field, e.g. `kubeconfig.users[0].user.exec`).
    """

    queryset = Cluster.objects.all()
    serializer_class = s.ClusterSerializer
    filterset_class = ClusterFilterSet
    lookup_field = "name"
    visible = access.visible_clusters
    check_read = access.check_read_cluster

    def create(self, request, *args, **kwargs):
        """Who may register is checked before the body is (nothing in a kubeconfig is looked at, or resolved, for
        someone who may not write it)."""
        access.check_platform_admin(request.user, "register clusters")
        return super().create(request, *args, **kwargs)

    def update(self, request, *args, **kwargs):
        """As `create`: the right to change the cluster first, then the body; `in_cluster` and `name` need a
        platform admin (services.clusters.check_platform_fields)."""
        access.check_manage_cluster(request.user, self.get_object())
        return super().update(request, *args, **kwargs)

    @extend_schema(responses=OpenApiTypes.OBJECT, parameters=[
        OpenApiParameter("offset", int, description="first node row (default 0)"),
        OpenApiParameter("limit", int, description=f"node rows (default {cluster_capacity.DEFAULT_LIMIT}, at most "
                                                   f"{cluster_capacity.MAX_LIMIT})")])
    @action(detail=True, methods=["get"])
    def capacity(self, request, name=None):
        """The cluster's schedulable nodes: allocatable, in use by gangweb's jobs and by other pods, and free, in
        total, per GPU type (`nvidia.com/gpu.product`) and per node (paginated: `offset`, `limit`; `count` is
        every node). Amounts in GPUs, CPU cores and GiB (`units`). Who may read the cluster may read this
        (services/cluster_capacity.py)."""
        cluster = self.get_object()
        offset, limit = cluster_capacity.parse_page(request.query_params)
        return Response(cluster_capacity.capacity(cluster, offset, limit))

    @transaction.atomic
    def perform_create(self, serializer):
        access.check_platform_admin(self.request.user, "register clusters")
        cluster = serializer.save()
        audit.record(self.request.user, "cluster.create", cluster, _redacted(serializer.validated_data))

    @transaction.atomic
    def perform_update(self, serializer):
        access.check_manage_cluster(self.request.user, serializer.instance)
        cluster_service.check_platform_fields(self.request.user, serializer.instance, serializer.validated_data)
        changed = _redacted(_changes(serializer.instance, serializer.validated_data))
        cluster = serializer.save()
        audit.record(self.request.user, "cluster.update", cluster, changed)

    @transaction.atomic
    def perform_destroy(self, instance):
        access.check_platform_admin(self.request.user, "delete clusters")
        audit.record(self.request.user, "cluster.delete", instance)
        instance.delete()


def _plain(value):
    """A JSON-safe form of a validated value for audit details: objects by name, lists item by item."""
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool, dict, type(None))):
        return value
    return str(value)


def _redacted(data: dict) -> dict:
    """Audit details of a write: the fields set, with credentials replaced by "(changed)" or "(cleared)"."""
    out = {key: _plain(value) for key, value in data.items()}
    if "kubeconfig" in out:
        out["kubeconfig"] = "(changed)" if data["kubeconfig"] else "(cleared)"
    return out


def volcano_states() -> list[Prefetch]:
    """The queue detail's Volcano Queue states with their clusters, by cluster name (one query)."""
    return [Prefetch("volcano_states", queryset=VolcanoQueueState.objects.select_related("cluster")
                     .order_by("cluster__name"))]


def _visible_cluster_id(user, name: str) -> int:
    """The id of cluster `name` when `user` may see it (access.visible_clusters). Raises ValidationError (400,
    field `cluster`) otherwise, in the same words whether it is hidden or missing, so names cannot be probed."""
    found = access.visible_clusters(user, Cluster.objects.filter(name=name)).values_list("id", flat=True).first()
    if found is None:
        raise DjangoValidationError({"cluster": f"no cluster named '{name[:63]}'"})
    return found


class QueuePolicyViewSet(VisibleObjectMixin, viewsets.ModelViewSet):
    """KAI queue policies, kept in sync with every cluster they target.

    Amounts are KAI units (GPU devices, CPU millicores, memory MB = 10^6 bytes; -1 unlimited); writes also take
    quantity strings ("4", "500m", "64Gi"), see scheduling.kube.kai_units. Writes answer with the queue and its
    `warnings`; delete answers 409 while the queue has children or jobs.

    Visible to users with a role on the queue or below it (services/access.py); writes are checked by
    services/queues.py.
    """

    serializer_class = s.QueuePolicySerializer
    filterset_class = QueuePolicyFilterSet
    lookup_field = "name"
    visible = access.visible_queues
    check_read = access.check_read_queue

    # The list: each queue's parent name by a lookup per queue shown, not a self-join (issue 14).
    LIST_RELATED = {"parent": ["name"]}

    def base_queryset(self):
        if self.action == "list":
            return related.annotate(QueuePolicy.objects.prefetch_related("clusters"), self.LIST_RELATED)
        qs = QueuePolicy.objects.select_related("parent").prefetch_related("clusters")
        if self.action == "retrieve":
            qs = qs.prefetch_related(Prefetch("cluster_states",
                                              queryset=QueueClusterState.objects.select_related("cluster")
                                              .order_by("cluster__name")), *volcano_states())
        return qs

    def get_serializer_class(self):
        return s.QueuePolicyDetailSerializer if self.action == "retrieve" else s.QueuePolicySerializer

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None and self.action == "list":
            page = related.attach(page, self.LIST_RELATED)
        return page

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["tree"] = queue_service.QueueTree.load_rows()  # read for warnings only
        context["tree"].visible = access.queue_tree_filter(self.request.user)  # warnings name only what they see
        return context

    def _named(self, name):
        """The queue `name` if the reader may see it, else 404; unlike `get_object`, the list filters (`?cluster=`
        narrows the list to queues targeting a cluster) do not apply: here `cluster` picks what is shown."""
        policy = get_object_or_404(QueuePolicy.objects.select_related("parent"), name=name)
        type(self).check_read(self.request.user, policy)
        return policy

    def _detail(self, policy, code):
        policy = self.base_queryset().prefetch_related(Prefetch(
            "cluster_states", queryset=QueueClusterState.objects.select_related("cluster").order_by("cluster__name")),
            *volcano_states()).get(pk=policy.pk)
        return Response(s.QueuePolicyDetailSerializer(policy, context=self.get_serializer_context()).data, status=code)

    @extend_schema(request=s.QueuePolicyWriteSerializer, responses={201: s.QueuePolicyDetailSerializer})
    def create(self, request, *args, **kwargs):
        """Create a queue; limits not given are -1 (unlimited). Answers with the queue and its warnings."""
        policy, _ = queue_service.create_queue(request.user, request.data)
        return self._detail(policy, status.HTTP_201_CREATED)

    @extend_schema(request=s.QueuePolicyWriteSerializer, responses=s.QueuePolicyDetailSerializer)
    def update(self, request, *args, **kwargs):
        """Change a queue (PUT and PATCH both merge: fields not sent keep their value)."""
        policy, _ = queue_service.update_queue(request.user, self.get_object(), request.data)
        return self._detail(policy, status.HTTP_200_OK)

    def destroy(self, request, *args, **kwargs):
        """Delete a queue; 409, changing nothing, while it has child queues or jobs."""
        queue_service.delete_queue(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(parameters=[
        OpenApiParameter("cluster", str, description="usage of this cluster only"),
        OpenApiParameter("parent", str, description="return this queue's children as the roots (a queue name) "
                                                    "instead of the top-level queues"),
        OpenApiParameter("depth", int, description="levels below the roots to include (0 = the roots alone, "
                                                   "with `children: []` and `children_count`); default: all"),
    ], responses={200: dict})
    @action(detail=False, methods=["get"])
    def tree(self, request):
        """The hierarchy with quota, limit, allocated and requested per resource (the scheduler's report, and
        gangweb's own estimate as `estimated_allocated` / `estimated_requested`), warnings, sync state, and
        `counts`: jobs `pending`, `running` and `finished_24h`, the queue's and every queue's below it.

        Without parameters, the whole tree as before. A client showing a large tree asks for `?depth=0` and then
        `?parent=<name>&depth=0` per expanded queue: each answer costs the same whatever the tree's size."""
        params = request.query_params
        depth = params.get("depth")
        if depth not in (None, ""):
            if not (depth.isascii() and depth.isdigit()) or int(depth) > 100:
                raise DjangoValidationError({"depth": f"'{depth[:20]}' is not a whole number from 0 to 100"})
            depth = int(depth)
        else:
            depth = None
        cluster = params.get("cluster") or None
        if cluster is not None:
            _visible_cluster_id(request.user, cluster)
        tree = queue_service.QueueTree.load_rows()
        roots = queue_service.queue_tree(cluster, parent=params.get("parent") or None,
                                         depth=depth, visible=access.queue_tree_filter(request.user), tree=tree)
        # Jobs pending, running and finished in 24 h per queue, its subtree's included (services/queue_counts.py).
        queue_counts.attach(roots, queue_counts.rolled_up(tree, queue_counts.job_counts(cluster)))
        return Response({"units": UNITS, "roots": roots})

    @extend_schema(parameters=[OpenApiParameter("cluster", str), OpenApiParameter("since", str, description="ISO 8601"),
                               OpenApiParameter("until", str, description="ISO 8601")],
                   responses=s.QueueUsageSampleSerializer(many=True))
    @action(detail=True, methods=["get"])
    def usage(self, request, name=None):
        """Usage history read back from the Queue CR status (oldest first, at most 5000 samples)."""
        policy = self.get_object()
        samples = QueueUsageSample.objects.filter(policy=policy).select_related("cluster")
        params = request.query_params
        if params.get("cluster"):
            samples = samples.filter(cluster__name=params["cluster"])
        for key, lookup in (("since", "at__gte"), ("until", "at__lt")):
            if params.get(key):
                samples = samples.filter(**{lookup: v.date_time(params[key], key)})
        rows = list(samples.order_by("-at")[:5000])[::-1]
        return Response({"units": UNITS, "samples": s.QueueUsageSampleSerializer(rows, many=True).data})

    @extend_schema(parameters=[OpenApiParameter("cluster", str, description="this cluster only")],
                   responses={200: dict})
    @action(detail=True, methods=["get"], url_path="fair-share")
    def fair_share(self, request, name=None):
        """The queue's fair share per cluster and resource as gangweb models KAI's division (quota first, then
        the surplus by priority and over-quota weight, level by level; services/fair_share.py), with quota,
        allocated, requested, borrowed, lent and one sentence saying why. Amounts in KAI units (`units`)."""
        policy = self._named(name)
        cluster = request.query_params.get("cluster") or None
        if cluster is not None:
            _visible_cluster_id(request.user, cluster)
        return Response(fair_share_service.queue_fair_share(policy, cluster,
                                                            visible=access.queue_tree_filter(request.user),
                                                            user=request.user))

    @extend_schema(parameters=[OpenApiParameter("cluster", str, description="this cluster only")],
                   responses={200: dict})
    @action(detail=True, methods=["get"])
    def line(self, request, name=None):
        """The queue's pending jobs in the order its scheduler considers them (services/queue_line.py: priority,
        then submit time), each with its position in the queue and across its parent, per cluster; at most
        100. Only the jobs the reader may see are listed; positions count every pending job."""
        policy = self._named(name)
        cluster = request.query_params.get("cluster") or None
        clusters = None
        if cluster is not None:
            found = _visible_cluster_id(request.user, cluster)
            clusters = [found]
        return Response({"queue": policy.name, "order": queue_line.ORDER,
                         "jobs": queue_line.line_payload(request.user, policy, clusters)})

    @extend_schema(request=None, responses={202: dict})
    @action(detail=False, methods=["post"])
    def sync(self, request):
        """Queue a sync of every cluster's Queues now (platform admins)."""
        if not access.is_platform_admin(request.user):
            raise PermissionDenied({"detail": "only platform admins may start a queue sync"})
        dispatch.sync_queue_clusters_on_commit(None)
        return Response({"detail": "queue sync queued for every cluster"}, status=status.HTTP_202_ACCEPTED)


class RuntimeTemplateViewSet(VisibleObjectMixin, viewsets.ModelViewSet):
    """Runtime templates. Writing a spec stores a new version. Shared templates (no queue) are managed by platform
    admins, team templates by admins of their queue."""

    # Specs come through templates.loadable_spec: one stored before the size limit stays in the database.
    queryset = RuntimeTemplate.objects.select_related("queue").prefetch_related(Prefetch(
        "versions", queryset=RuntimeTemplateVersion.objects.defer("spec").annotate(
            shown_spec=template_service.loadable_spec())))
    serializer_class = s.RuntimeTemplateSerializer
    filterset_class = RuntimeTemplateFilterSet
    lookup_field = "name"
    visible = access.visible_templates
    check_read = access.check_read_template
    # The list: the owning queue's name by a lookup per template, the versions without the model's ordering by
    # template name (a join): joins planned from stale statistics scanned whole tables per row (issue 14).
    LIST_RELATED = {"queue": ["name"]}

    def base_queryset(self):
        if self.action != "list":
            return super().base_queryset()
        return related.annotate(RuntimeTemplate.objects.prefetch_related(
            Prefetch("versions", queryset=RuntimeTemplateVersion.objects.order_by())), self.LIST_RELATED)

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None and self.action == "list":
            page = related.attach(page, self.LIST_RELATED)
        return page

    def create(self, request, *args, **kwargs):
        data = request.data if isinstance(request.data, dict) else {}
        version = template_service.create_template(request.user, data.get("name"), data.get("description", ""),
                                                   data.get("spec"), queue=data.get("queue"),
                                                   pod_security_level=data.get("pod_security_level", ""),
                                                   policy_exceptions=data.get("policy_exceptions"))
        template = self.queryset.get(pk=version.template_id)
        return Response(self.get_serializer(template).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        template = self.get_object()
        data = request.data if isinstance(request.data, dict) else {}
        if "spec" in data:
            template_service.add_version(request.user, template, data["spec"], data.get("description"),
                                         data.get("pod_security_level"), data.get("policy_exceptions"))
        else:
            if "pod_security_level" in data or "policy_exceptions" in data:
                policy.update_template_settings(request.user, template, data.get("pod_security_level"),
                                                data.get("policy_exceptions"))
            if "description" in data:
                template_service.update_description(request.user, template, data["description"])
        template = self.queryset.get(pk=template.pk)
        return Response(self.get_serializer(template).data)

    def perform_destroy(self, instance):
        template_service.delete_template(self.request.user, instance)

    @extend_schema(responses=s.TemplateVersionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def versions(self, request, name=None):
        """Every version of the template, newest first."""
        template = self.get_object()
        versions = RuntimeTemplateVersion.objects.filter(template=template).defer("spec").annotate(
            shown_spec=template_service.loadable_spec()).order_by("-version")
        return Response(s.TemplateVersionSerializer(versions, many=True).data)

    @extend_schema(request=None, responses=s.TemplateVersionSerializer)
    @action(detail=True, methods=["post"], url_path=r"versions/(?P<version>[0-9]+)/retire")
    def retire(self, request, name=None, version=None):
        """Retire one version: it takes no new jobs (submit and resubmit answer 400); jobs that used it keep it.
        One-way; retiring it again changes nothing. Managers of the template only."""
        template = self.get_object()
        retired = template_service.retire_version(request.user, template, int(version))
        retired = RuntimeTemplateVersion.objects.defer("spec").annotate(
            shown_spec=template_service.loadable_spec()).get(pk=retired.pk)
        return Response(s.TemplateVersionSerializer(retired).data)


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
            # (services/related.py, issue 14).
            return related.annotate(GangJob.objects.defer("resolved_spec", "observed"),
                                    related.JOB_LIST_RELATED).annotate(in_phase_since=IN_PHASE_SINCE)
        # The queue's parent too: a pending job's position names it (services/queue_line.py).
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
        each group's jobs come together, in the order asked within it (services/job_list.py); `id` breaks ties,
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
        return s.GangJobDetailSerializer if self.action != "list" else s.GangJobSerializer

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["with_position"] = self.action == "retrieve"  # reads only: see GangJobDetailSerializer.position
        return context

    def _detail(self, job, code):
        # The service just authorised this write, so echo the job back even to a token without "read".
        job = self._base_queryset().prefetch_related("transitions").get(pk=job.pk)
        return Response(s.GangJobDetailSerializer(job).data, status=code)

    @extend_schema(request=s.JobSubmitSerializer, responses={201: s.GangJobDetailSerializer},
                   parameters=[IDEMPOTENCY_HEADER])
    def create(self, request):
        """Submit a job. With an Idempotency-Key that repeats, answers with the first job, 201 as the first time,
        and `Idempotent-Replayed: true`."""
        job, created = job_service.submit(request.user, request.data, request.headers.get("Idempotency-Key"))
        if created:  # the service returns it with its relations and timeline loaded: no re-read
            response = Response(s.represent(s.GangJobDetailSerializer, job), status=status.HTTP_201_CREATED)
        else:
            response = self._detail(job, status.HTTP_201_CREATED)
            response[REPLAYED_HEADER] = "true"
        # Queue-limit warnings from submit (services.queues.check_job_limits), e.g. the queue is full for now.
        response.data["warnings"] = getattr(job, "submit_warnings", [])
        return response

    @extend_schema(request=s.JobUpdateSerializer, responses=s.GangJobDetailSerializer)
    def partial_update(self, request, pk=None):
        """Change a job's queue or priority class; the gang object follows."""
        job = job_service.update(request.user, self.get_object(), request.data)
        return self._detail(job, status.HTTP_200_OK)

    @extend_schema(request=s.BulkSubmitSerializer, parameters=[IDEMPOTENCY_HEADER, preferences.PREFER_HEADER],
                   responses={
        201: PolymorphicProxySerializer(
            component_name="BulkSubmitResponse", resource_type_field_name=None,
            serializers=[s.BulkSubmitResultSerializer, s.BulkSubmitMinimalResultSerializer])})
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
        serializer = s.JobRefSerializer if minimal else s.GangJobSerializer
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

    @extend_schema(request=s.BulkCancelSerializer, responses={200: s.BulkCancelResultSerializer},
                   operation_id="v1_jobs_cancel_many")
    @action(detail=False, methods=["post"], url_path="cancel")
    def cancel_many(self, request):
        """Cancel several jobs: ``{"ids": [12, 13]}`` (1 to 500, none repeated; 400 naming `ids` or `ids[i]`
        otherwise, and nothing is cancelled). Each job is cancelled as POST /api/v1/jobs/<id>/cancel/ would,
        checked on its own: the answer lists every id with `cancelled` and, when refused, the `status` the single
        cancel would have answered (403, 404, 409) and the `reason`; a refused job is left as it was."""
        ids = bulk_cancel.parse_body(request.data)
        return Response(bulk_cancel.payload(bulk_cancel.cancel_many(request.user, ids)))

    @extend_schema(request=None, responses=s.GangJobDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel: delete the job's cluster objects; the job ends Cancelled."""
        job = job_service.cancel(request.user, self.get_object())
        return self._detail(job, status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={201: s.GangJobDetailSerializer})
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

    @extend_schema(responses=s.PhaseTransitionSerializer(many=True))
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
            offset = _int_param(request, "offset", 0, 0, None, errors)
            limit = _int_param(request, "limit", TIMELINE_PAGE_MAX, 1, TIMELINE_PAGE_MAX, errors)
            if errors:
                raise DjangoValidationError(errors)
        entries = timeline.annotate(job.transitions.all(), timezone.now())
        if not paged:
            return Response(s.PhaseTransitionSerializer(entries, many=True).data)
        page = entries[offset:offset + limit]
        response = Response(s.PhaseTransitionSerializer(page, many=True).data)
        response["X-Total-Count"] = str(len(entries))
        if offset + limit < len(entries):
            nxt = request.build_absolute_uri(f"{request.path}?offset={offset + limit}&limit={limit}")
            response["Link"] = f'<{nxt}>; rel="next"'
        return response

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def estimate(self, request, pk=None):
        """When the pending job would start (services/start_estimate.py): p50 and p90 times with the evidence, or
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
            *(f for f in s.JobWaitStateSerializer.Meta.fields
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
    ], responses=s.JobWaitSerializer)
    @action(detail=False, methods=["get"])
    def wait(self, request):
        """Long-poll: answer as soon as any named job changes phase (a new timeline entry) after `after`, at
        once when nothing can change (every job terminal, or none visible), else at `timeout`. The answer is the
        current state of every job named, never a history: a client is done when `all_terminal` is true.

        A waiting request holds a web thread but no database connection; each web process reads the jobs all its
        waiters wait on in one query per `GANGWEB_WAIT_POLL_SECONDS` (services/job_wait.py). Ids of jobs you
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
                         "jobs": s.JobWaitStateSerializer(jobs, many=True).data,
                         "missing": [i for i in ids if i not in found]})

    @extend_schema(responses={200: s.JobEventsSerializer, 502: s.JobEventsSerializer})
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

    @extend_schema(parameters=[s.JobLogQuerySerializer], responses={
        (200, "text/plain"): OpenApiTypes.STR, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT,
        409: OpenApiTypes.OBJECT, 502: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        """A container's log, read live from the job's cluster (services/job_logs.py), as text/plain. Only the
        job's own pods (controller reference to a Job UID gangweb recorded) in its namespace; 404 to whoever may not
        view the job. At most GANGWEB_LOG_MAX_BYTES bytes: a longer log is cut, with the header
        `X-Gangweb-Log-Truncated: true` and a last line saying so. `follow=true` streams new lines for
        GANGWEB_LOG_FOLLOW_SECONDS at most. Headers `X-Gangweb-Log-Pod`, `-Container`, `-Pod-Set`, `-Index` name
        what was read. 404 when no pod matches (naming the parameter), 409 when the cluster refuses (a container
        not started yet, no previous container), 502 when it cannot be asked."""
        job = self.get_object()  # the job detail's access check: 404 to others
        params = s.JobLogQuerySerializer(data=request.query_params)
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


class WebhookSubscriptionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                                 viewsets.GenericViewSet):
    """Webhooks on job phase changes (Standard Webhooks signatures): yours only; managed with a password login.
    The create answer holds the signing secret, shown once. `deliveries` is the delivery log; `test` sends a test
    event."""

    serializer_class = s.WebhookSubscriptionSerializer

    def get_queryset(self):
        qs = WebhookSubscription.objects.select_related("owner", "queue")
        return notifications.visible_subscriptions(self.request.user, qs)

    @extend_schema(request=s.WebhookSubscriptionWriteSerializer,
                   responses={201: s.WebhookSubscriptionCreatedSerializer})
    def create(self, request):
        """Subscribe a receiver URL to phase changes of a job, a queue's jobs, or every job you submitted."""
        sub, secret = notifications.create_subscription(request.user, request.data)
        sub = self.get_queryset().get(pk=sub.pk)
        sub.secret = secret
        return Response(s.WebhookSubscriptionCreatedSerializer(sub).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.WebhookSubscriptionWriteSerializer, responses=s.WebhookSubscriptionSerializer)
    def partial_update(self, request, pk=None):
        """Change a subscription (fields sent only)."""
        sub = notifications.update_subscription(request.user, self.get_object(), request.data)
        return Response(s.WebhookSubscriptionSerializer(sub).data)

    def perform_destroy(self, instance):
        notifications.check_manage(self.request.user)
        instance.delete()

    @extend_schema(responses=s.WebhookDeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        """The subscription's last 200 deliveries, newest first: status, attempts, last status code and error."""
        sub = self.get_object()
        return Response(s.WebhookDeliverySerializer(sub.deliveries.all()[:200], many=True).data)

    @extend_schema(request=None, responses={202: s.WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a test event now (type `webhook.test`); the answer is its delivery row, Pending."""
        sub = self.get_object()
        notifications.check_manage(request.user)
        delivery = notifications.send_test(request.user, sub)
        dispatch.deliver_webhook_on_commit(delivery.pk)
        return Response(s.WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """API tokens for pipelines: create (the secret is shown once), list, revoke. Password logins only."""

    serializer_class = s.ApiTokenSerializer
    permission_classes = [NotWithToken]

    def get_queryset(self):
        qs = ApiToken.objects.select_related("owner").prefetch_related("queues")
        return token_service.visible(self.request.user, qs)

    @extend_schema(request=s.ApiTokenCreateSerializer, responses={201: s.ApiTokenCreatedSerializer})
    def create(self, request):
        """Create a token scoped to queues and actions. The response holds the token: it is never shown again."""
        token, plaintext = token_service.create(request.user, request.data)
        token = self.get_queryset().get(pk=token.pk)
        token.token = plaintext
        return Response(s.ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Revoke the token at once; requests with it then get 401."""
        token = token_service.revoke(request.user, self.get_object())
        return Response(s.ApiTokenSerializer(token).data)


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log, newest first: who created, changed, submitted or cancelled what. Platform admins only."""

    queryset = AuditEvent.objects.select_related("token")
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilterSet
    permission_classes = [IsPlatformAdmin]
