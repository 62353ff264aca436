"""A running job whose owner Job and gang objects vanish (deleted by hand, a cluster restored without them) is
recreated by the reconciler, and the timeline says so: a new attempt starting Dispatched, reason Recreated, naming
what was missing, then Queued, Scheduled and Running again; the run time reads the new run, not across the loss."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.choices import GangPhase as P
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob
from scheduling.observe import timeline
from tests import builders

from .reconcile_support import reconciled_until, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]



def test_a_running_jobs_vanished_owner_and_gang_objects_are_recreated_as_a_new_attempt(world, api):
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi")])
    reconciled_until(world, job, P.RUNNING, 0)
    names = world.names(job)
    owner = names.pod_sets[0].owner_name

    # Gone by hand: the owner Job (its pods go with it) and the gang objects. The Workload is the job's root, so the
    # garbage collector deletes the Service it owns too (docs/backends.md, "Root object").
    for ref in (JOB, world.k8s.POD_GROUP, world.k8s.WORKLOAD):
        for obj in world.gang(job, ref):
            objects.delete(world.api, ref, world.namespace, obj["metadata"]["name"])
    wait_for(lambda: not any(world.gang(job, ref)
                             for ref in (JOB, world.k8s.POD_GROUP, world.k8s.WORKLOAD, POD, SERVICE)), timeout=60,
             what="the owner Job, its pods, the gang objects and (through the root) the Service gone")

    result = world.reconcile(job)

    assert result.error is None
    ns = world.namespace
    assert [a for a in result.actions if a.startswith("create ")] == [
        f"create Workload {ns}/{names.gang_name}", f"create PodGroup {ns}/{names.gang_name}",
        f"create Service {ns}/{names.service_name}", f"create Job {ns}/{owner}"]  # the Service beside the PodGroup
    restart = GangJob.objects.get(pk=job.pk).transitions.get(phase=P.DISPATCHED, attempt=1)
    assert (restart.reason, restart.source) == ("Recreated", f"Job {ns}/{owner}")
    assert restart.message == (f"recreated what was missing from the cluster: Workload {ns}/{names.gang_name}, "
                               f"PodGroup {ns}/{names.gang_name}, Service {ns}/{names.service_name}, Job {ns}/{owner}")
    # At the new objects' creationTimestamp: the first one created (the Workload), which under load can be a second
    # before the Job's (reconcile/jobs/reconciler.py `note_restart`).
    created = [world.get(JOB, owner), world.get(world.k8s.WORKLOAD, names.gang_name),
               world.get(world.k8s.POD_GROUP, names.gang_name)]
    assert restart.at.isoformat().replace("+00:00", "Z") == min(o["metadata"]["creationTimestamp"] for o in created)

    job = reconciled_until(world, job, P.RUNNING, 1)
    entries = list(job.transitions.order_by("attempt", "at", "id").values_list("phase", "attempt", "at"))
    assert [(phase, attempt) for phase, attempt, _ in entries] == [
        (P.SUBMITTED, 0), (P.DISPATCHED, 0), (P.QUEUED, 0), (P.SCHEDULED, 0), (P.RUNNING, 0),
        (P.DISPATCHED, 1), (P.QUEUED, 1), (P.SCHEDULED, 1), (P.RUNNING, 1)]
    times = [at for *_, at in entries]
    assert times == sorted(times)

    detail = api.get(f"/api/v1/jobs/{job.pk}/").data
    assert detail["requeues"] == 1
    assert detail["durations"]["run_time"]["ongoing"] is True
    # The run time counts from the new run, not across the loss.
    running_again = job.transitions.get(phase=P.RUNNING, attempt=1).at
    later = running_again + timedelta(seconds=10)
    assert timeline.spans(list(job.transitions.all()), later)["run_time"] == {
        "duration_s": 10.0, "ongoing": True, "inferred": False}
    assert [(e["phase"], e["attempt"], e["reason"]) for e in detail["timeline"]][5] == (P.DISPATCHED, 1, "Recreated")
