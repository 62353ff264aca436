"""/api/v1/clusters/: clusters, their kubeconfigs, health and capacity.
"""
from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...filtersets import ClusterFilterSet
from ...models import Cluster
from ...services.access import audit
from ...services.access import roles as access
from ...services.clusters import capacity as cluster_capacity
from ...services.clusters import checks as cluster_service
from ...services.clusters import summary as cluster_summary
from .. import serializers as s
from ..summary_serializers import ClusterSummaryListSerializer
from .common import VisibleObjectMixin, changed_fields, redacted


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
        platform admin (services.clusters.checks.check_platform_fields)."""
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
        (services/clusters/capacity.py)."""
        cluster = self.get_object()
        offset, limit = cluster_capacity.parse_page(request.query_params)
        return Response(cluster_capacity.capacity(cluster, offset, limit))

    @extend_schema(responses=ClusterSummaryListSerializer)
    @action(detail=False, methods=["get"])
    def summary(self, request):
        """The clusters the reader may see, side by side: per cluster its capacity (allocatable GPUs, CPU cores and
        memory of its schedulable nodes), what gangweb's running jobs request there and what its schedulers report
        as allocated, what is free (an upper bound), gangweb's jobs waiting there and their requests, whether each
        backend's scheduler is seen, its Kubernetes version and whether its data is current (`reachability`;
        `unknown` with why when gangweb cannot know). Amounts in GPUs, CPU cores and GiB (`units`). The overview
        page shows the same answer (services/clusters/summary.py); no cluster is read to make it."""
        return Response(cluster_summary.summaries(request.user))

    @transaction.atomic
    def perform_create(self, serializer):
        access.check_platform_admin(self.request.user, "register clusters")
        cluster = serializer.save()
        audit.record(self.request.user, "cluster.create", cluster, redacted(serializer.validated_data))

    @transaction.atomic
    def perform_update(self, serializer):
        access.check_manage_cluster(self.request.user, serializer.instance)
        cluster_service.check_platform_fields(self.request.user, serializer.instance, serializer.validated_data)
        changed = redacted(changed_fields(serializer.instance, serializer.validated_data))
        cluster = serializer.save()
        audit.record(self.request.user, "cluster.update", cluster, changed)

    @transaction.atomic
    def perform_destroy(self, instance):
        access.check_platform_admin(self.request.user, "delete clusters")
        audit.record(self.request.user, "cluster.delete", instance)
        instance.delete()
