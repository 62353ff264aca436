"""A pass that raced with a change of its job's row: the job ended, was cancelled, cleaned up or moved to another
cluster since the pass loaded it. Read the row before the first create (`refuse_when_over`) and after the creates
(`cancelled_meanwhile`), and hand back what was made (`hand_back`). A mixin of `JobReconciler`."""
from __future__ import annotations

from ...choices import TERMINAL_PHASES, DesiredState, GangPhase
from ...models import GangJob
from .. import timeline_reads
from .common import Done


def over_because(row: dict | None, cluster_id: int | None = None) -> str | None:
    """Why a job's row (`phase`, `desired_state`, `cleaned_up_at`, `cluster_id`, as read now; None when the row is
    gone) forbids making anything for it in cluster `cluster_id`: it ended (Succeeded, Failed, Cancelled), a cancel
    was asked for, its clean-up ran, or it moved to another cluster (reconcile/moves.py). None when the job still
    wants its gang there."""
    if row is None:
        return "the job was deleted"
    if cluster_id is not None and row.get("cluster_id") not in (None, cluster_id):
        return "the job moved to another cluster"
    if row["phase"] in TERMINAL_PHASES:
        return f"the job is {row['phase']}"
    if row["desired_state"] == DesiredState.CANCEL:
        return "the job's cancel was asked for"
    if row["cleaned_up_at"] is not None:
        return "the job was cleaned up"
    return None


class RacedSteps:
    """`refuse_when_over`, `cancelled_meanwhile`, `hand_back` (module docstring)."""

    def refuse_when_over(self, making: str) -> None:
        """Before this pass first creates anything, or replaces the gang to create it anew: read the job's row again
        (one query, three columns) and end the pass (Done), creating nothing, when since the pass loaded it the job
        ended (Succeeded, Failed, Cancelled), a cancel was asked for, or its clean-up ran (`cleaned_up_at`;
        `over_because`). `making` names what would have been made, for the pass's actions.

        A pass's row may be older than the job's end: a resync loads its rows up to a pass's length before their
        turn, and a pass may wait on a stopped API server. Its clean-up may then have deleted the gang and set
        `cleaned_up_at` already, and a gang made again now would stay for good. So a pass creates nothing for a job
        whose end, cancel or clean-up was committed before this read. Read once per pass (`_row_checked`), before
        its first create (every create goes through `ensure_root` or `create_round`); what ends the job while the
        pass's creates are in flight is found by the read after them (`cancelled_meanwhile`), and a clean-up that
        commits after that read, having listed before the creates, by the next resync (reconcile/left_behind.py)."""
        if getattr(self, "_row_checked", False):
            return
        row = GangJob.objects.filter(pk=self.job.pk).values("phase", "desired_state", "cleaned_up_at",
                                                             "cluster_id").first()
        why = over_because(row, self.job.cluster_id)
        if why is None:
            self._row_checked = True
            return
        # Read before the pass's first create: nothing this pass made is in the cluster to hand back.
        self.actions.append(f"{why} since this pass loaded it: {making} not created")
        raise Done

    def cancelled_meanwhile(self) -> bool:
        """After this pass created objects, read the job's row again: when since the pass loaded it the job was
        cancelled, ended or cleaned up (`over_because`; a clean-up that ran while this pass's creates were in
        flight may have found the cluster empty), nothing would ever delete what this pass just made: it is handed
        back (`hand_back`). Our creates finished before this read, so a clean-up or cancel committed after it is
        seen by its own pass's LIST. Returns True when the job was cancelled (and its objects are being deleted);
        raises Done when it ended.

        When the pass has not read the job's timeline yet (a batch's, an event's pass; a resync's rows come with
        theirs), the row is read with it, in one statement (`timeline_reads.read_row_and_timeline`), and the timeline is
        the one the pass's observation then derives from (`StatusUpdate.recorded`: read after the row the pass
        holds, as it requires)."""
        if not any(a.startswith("create ") for a in self.actions):
            return False
        if self.update.recorded is None and self.job.phase not in TERMINAL_PHASES:
            row, recorded = timeline_reads.read_row_and_timeline(self.job)
            if row is not None and over_because(row, self.job.cluster_id) is None:
                self.update.recorded = recorded
                return False
        else:
            row = GangJob.objects.filter(pk=self.job.pk).values("phase", "desired_state", "cleaned_up_at",
                                                                 "cluster_id").first()
        if row is None or over_because(row, self.job.cluster_id) is None:
            return False
        return self.hand_back(row)

    def hand_back(self, row: dict) -> bool:
        """This pass made objects for a job that, since the pass loaded it, was cancelled, ended or cleaned up (`row`:
        phase, desired_state, cleaned_up_at as read now). `cleaned_up_at` and `objects_removed_at` are cleared at once
        (one UPDATE: the resync takes the job again whatever happens to this pass), then: a cancelled job is cancelled
        by this pass (its objects deleted; returns True); an ended one ends the pass (Done) and is left to its
        clean-up (a resync's rows are loaded up to a pass's length before their turn: a fault run left 4 finished
        jobs holding gang objects so)."""
        if row.get("cluster_id") not in (None, self.job.cluster_id):
            self.strand_created()  # moved meanwhile: what it made here goes, now or at this cluster's next resync
            raise Done
        GangJob.objects.filter(pk=self.job.pk).update(cleaned_up_at=None, objects_removed_at=None)
        self.job.cleaned_up_at = self.job.objects_removed_at = None  # not cleaned up: what this pass made is there
        if row["desired_state"] == DesiredState.CANCEL or row["phase"] == GangPhase.CANCELLED:
            self.job.desired_state = row["desired_state"]
            if row["phase"] == GangPhase.CANCELLED:
                self.job.phase = GangPhase.CANCELLED  # already recorded by the other pass: not recorded twice
            self.cancel()
            return True
        self.actions.append(f"{over_because(row)} since this pass loaded it: what it made is left to its clean-up")
        raise Done


