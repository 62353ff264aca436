"""/api/v1/queues/: queue policies, their tree, fair share and sync state.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...choices import QueueFamily
from ...db import related
from ...filtersets import QueuePolicyFilterSet
from ...kube.kai_units import UNITS
from ...models import Cluster, QueueClusterState, QueuePolicy, QueueUsageSample
from ...services import validation as v
from ...services.access import roles as access
from ...services.errors import PermissionDenied
from ...services.queues import fair_share as fair_share_service
from ...services.queues import line as queue_line
from ...services.queues import payloads as queue_payloads
from ...services.queues import policies as queue_service
from ...services.queues import usage_history as usage_history_service
from ...work import dispatch
from .. import serializers as s
from .common import VisibleObjectMixin


def queue_states() -> list[Prefetch]:
    """The queue detail's KAI Queue states (`kai_states`), Volcano Queue states (`volcano_states`) and Kueue states
    (`kueue_states`), each with their clusters, by cluster name (one query each)."""
    return [Prefetch("cluster_states", to_attr=f"{family}_states", queryset=QueueClusterState.objects.filter(
        family=family).select_related("cluster").order_by("cluster__name")) for family in QueueFamily]

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

    Visible to users with a role on the queue or below it (services/access/roles.py); writes are checked by
    services/queues/policies.py.
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
            qs = qs.prefetch_related(*queue_states())
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
        policy = self.base_queryset().prefetch_related(*queue_states()).get(pk=policy.pk)
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
        # With the jobs pending, running and finished in 24 h per queue, its subtree's included, read in the usage's
        # query (services/queues/counts.py usage_and_counts).
        roots = queue_payloads.queue_tree(cluster, parent=params.get("parent") or None, depth=depth,
                                         visible=access.queue_tree_filter(request.user), tree=tree, with_counts=True)
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

    @extend_schema(parameters=[OpenApiParameter("window", str, enum=list(usage_history_service.WINDOWS),
                                               description="24h (15-minute buckets), 7d (hours; the default) or "
                                                           "30d (6 hours)"),
                               OpenApiParameter("cluster", str, description="this cluster's jobs only")],
                   responses={200: dict})
    @action(detail=True, methods=["get"], url_path="usage-history")
    def usage_history(self, request, name=None):
        """The queue's (and its subtree's) allocation and decayed usage over a window, in buckets, from gangweb's
        own job timelines on every backend (services/queues/usage_history.py; the queue page's chart): per bucket
        `allocated` (time-average: GPU devices, CPU cores, memory bytes), `used` and `decayed` (at the bucket's
        end), in device-, core- and byte-seconds."""
        policy = self._named(name)
        params = request.query_params
        key = params.get("window") or usage_history_service.DEFAULT_WINDOW
        if key not in usage_history_service.WINDOWS:
            raise DjangoValidationError({"window": f"'{key[:16]}' is not one of "
                                                   f"{', '.join(usage_history_service.WINDOWS)}"})
        clusters = [_visible_cluster_id(request.user, params["cluster"])] if params.get("cluster") else None
        got = usage_history_service.usage_history(policy.id, queue_service.QueueTree.load_rows(), key,
                                                  cluster_ids=clusters)
        return Response({"queue": policy.name, **usage_history_service.for_api_answer(got)})

    @extend_schema(parameters=[OpenApiParameter("cluster", str, description="this cluster only")],
                   responses={200: dict})
    @action(detail=True, methods=["get"], url_path="fair-share")
    def fair_share(self, request, name=None):
        """The queue's fair share per cluster and resource as gangweb models KAI's division (quota first, then
        the surplus by priority and over-quota weight, level by level; services/queues/fair_share.py), with quota,
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
        """The queue's pending jobs in the order its scheduler considers them (services/queues/line.py: priority,
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
