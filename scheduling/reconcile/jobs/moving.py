"""The pass's half of a move (reconcile/moves.py decides it): on the cluster the job leaves, read its objects
afresh, give the move up if anything of it started, else delete everything of it as a cancel does (UID
preconditions) and, once this pass's own LIST finds nothing left, switch the job to the other cluster. A mixin of
`JobReconciler`, which it needs for `observed`, `read`, `delete_all`, `backend`, `actions`, `update`."""
from __future__ import annotations

from ...choices import RUNNING_PHASES
from ...models import Cluster, StrandedObjects
from .. import moves, ownership
from .common import WAIT_SECONDS, Done, Requeue, is_terminating

MOVING = "Moving"  # phase_reason while the job's objects on the cluster it leaves are being deleted


class MovingSteps:
    """`move` (a move under way: `GangJob.move_to`) and `strand_created` (objects made after the job moved)."""

    def started_because(self) -> str:
        """Why the job counts as started on this cluster ("" when it does not): a pod of it bound to a node or past
        Pending, its gang admitted by its scheduler, or a Scheduled/Running phase. Read from this pass's LIST."""
        if self.job.phase in RUNNING_PHASES:
            return f"it is {self.job.phase}"
        for pod in self.observed.pods:
            name = (pod.get("metadata") or {}).get("name", "?")
            if (pod.get("spec") or {}).get("nodeName"):
                return f"its pod {name} was bound to node {pod['spec']['nodeName']}"
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                return f"its pod {name} is {pod['status']['phase']}"
        gang = [obj for kind in self.observed.gang.values() for obj in kind.values() if not is_terminating(obj)]
        if gang and self.backend.read_status(gang).admitted:
            return "its scheduler admitted the gang"
        return ""

    def move(self) -> None:
        """Carry out the move recorded on the job (module docstring). Raises Requeue while its objects here are
        being deleted, Done once it moved (the pass writes nothing more: the row is the new cluster's now)."""
        job = self.job
        target = Cluster.objects.filter(pk=job.move_to_id).first()
        if self.observed.from_snapshot:  # a snapshot may predate what started: look now
            self.observed = self.read()
            self.actions.append("read again before moving")
        why = self.started_because() or ("" if target is not None else "the cluster it was to go to is gone")
        if why:
            moves.drop(job, why)
            self.actions.append(f"not moved: {why}")
            self.ensure()
            return
        if not self.delete_all():
            self.update.say(job, MOVING, f"moving to {target.name}: deleting its objects in {job.cluster.name} "
                                         "first")
            raise Requeue(WAIT_SECONDS, MOVING, f"deleting the job's objects in {job.cluster.name} before it moves "
                                                f"to {target.name}")
        if moves.switch(job, target, job.move_reason or f"moved to {target.name}"):
            self.actions.append(f"nothing of it left in {self.job.cluster.name}: moved to {target.name}")
            raise Done
        self.actions.append(f"not moved to {target.name}: its row changed meanwhile")
        raise Done

    def strand_created(self) -> None:
        """This pass created objects for a job that moved to another cluster while it worked: delete them now (UID
        preconditions), and keep their keys and UIDs as StrandedObjects, so this cluster's next resync deletes what
        is left (reconcile/stranded.py)."""
        made = {ownership.object_key(o): (o.get("metadata") or {}).get("uid") for o in self.created}
        made = {k: u for k, u in made.items() if u}
        if made:
            StrandedObjects.objects.create(cluster_id=self.job.cluster_id, job_id=self.job.pk,
                                           namespace=self.job.namespace, owner_uids=made,
                                           backend_plugin=self.backend.name)
        self.actions.append("the job moved to another cluster meanwhile: what this pass made here is deleted")
        try:
            self.delete_all()
        except Requeue:
            pass  # left to the resync (StrandedObjects)
