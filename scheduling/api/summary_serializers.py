"""The shapes of GET /api/v1/clusters/summary/ and of a queue's `per_cluster`, for the OpenAPI schema only: the
answers are built by services/clusters/summary.py and services/queues/per_cluster.py, and these serializers
describe them (drf-spectacular reads their fields; nothing is validated or represented through them)."""
from rest_framework import serializers

RESOURCE_HELP = "GPUs, CPU cores and GiB of memory (the answer's `units`)"


class _Amounts(serializers.Serializer):
    gpu = serializers.FloatField()
    cpu = serializers.FloatField()
    memory = serializers.FloatField()


class _Reachability(serializers.Serializer):
    state = serializers.ChoiceField(choices=["reachable", "unreachable", "forbidden", "stale", "unknown"],
                                    help_text="the last probe's verdict; stale when it is older than 5 minutes")
    last_probe_at = serializers.DateTimeField(allow_null=True)
    message = serializers.CharField(help_text="why, for people (\"unknown: last probed 12 min ago ...\")")


class _Capacity(serializers.Serializer):
    known = serializers.BooleanField()
    message = serializers.CharField(help_text="why it is unknown, or empty")
    nodes = serializers.IntegerField(allow_null=True, help_text="schedulable nodes (Ready, not cordoned)")
    allocatable = _Amounts(allow_null=True, help_text="sum of the schedulable nodes' status.allocatable; "
                                                      + RESOURCE_HELP)
    last_known = serializers.DictField(allow_null=True, help_text="{nodes, allocatable} as last listed, when the "
                                                                  "cluster is unreachable or its data stale")


class _Reported(serializers.Serializer):
    known = serializers.BooleanField()
    amounts = _Amounts(allow_null=True, help_text="allocated to gangweb's leaf queues as the schedulers report it")
    by = serializers.CharField(help_text="which reports: \"KAI queue status\", \"Kueue queue status\", ...")
    at = serializers.DateTimeField(allow_null=True, help_text="the latest report read")
    message = serializers.CharField()


class _InUse(serializers.Serializer):
    jobs = serializers.IntegerField(help_text="gangweb's Scheduled and Running jobs there")
    gangweb = _Amounts(help_text="what those jobs request; " + RESOURCE_HELP)
    reported = _Reported()


class _Waiting(serializers.Serializer):
    jobs = serializers.IntegerField(help_text="gangweb's Submitted, Dispatched and Queued jobs there")
    requested = _Amounts(help_text="what they request; " + RESOURCE_HELP)


class ClusterSummarySerializer(serializers.Serializer):
    """One cluster side by side with the others (services/clusters/summary.py)."""

    name = serializers.CharField()
    kubernetes_version = serializers.CharField(allow_null=True)
    available_backends = serializers.ListField(child=serializers.CharField())
    reachability = _Reachability()
    schedulers = serializers.DictField(help_text="{backend family: {state: seen|not_seen|unknown, scheduler, "
                                                 "seen_at, by, text}} (observe/presence.py)")
    capacity = _Capacity()
    in_use = _InUse()
    free = _Amounts(allow_null=True, help_text="capacity minus gangweb's in use, at least 0 (an upper bound: other "
                                               "pods are not counted); null while capacity is unknown")
    free_is_upper_bound = serializers.BooleanField()
    waiting = _Waiting()


class ClusterSummaryListSerializer(serializers.Serializer):
    """GET /api/v1/clusters/summary/."""

    units = serializers.DictField(child=serializers.CharField(), help_text='{"gpu": "GPUs", "cpu": "CPU cores", '
                                                                          '"memory": "GiB"}')
    clusters = ClusterSummarySerializer(many=True)


class _QueueResource(serializers.Serializer):
    quota = serializers.FloatField()
    limit = serializers.FloatField(help_text="-1: unlimited")
    in_use = serializers.FloatField(help_text="the Scheduled and Running jobs' requests (gangweb's count)")
    reported = serializers.FloatField(allow_null=True, help_text="allocated as the cluster's scheduler reports it")
    waiting = serializers.FloatField(help_text="the Submitted, Dispatched and Queued jobs' requests")


class _QueueResources(serializers.Serializer):
    gpu = _QueueResource()
    cpu = _QueueResource()
    memory = _QueueResource()


class _QueueJobs(serializers.Serializer):
    running = serializers.IntegerField()
    waiting = serializers.IntegerField()


class QueueClusterUseSerializer(serializers.Serializer):
    """A queue's use in one cluster (services/queues/per_cluster.py); amounts in queue units (GPU devices, CPU
    millicores, memory MB), the queue's and every queue's below it."""

    cluster = serializers.CharField()
    health = serializers.CharField()
    targeted = serializers.BooleanField(help_text="false: the queue no longer takes jobs there, but has active jobs")
    jobs = _QueueJobs()
    resources = _QueueResources()
