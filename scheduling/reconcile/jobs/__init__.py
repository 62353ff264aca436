"""Reconcile one gang job into its cluster: read what is there, compute what should be, diff, act.

The package, by concern: `reconciler` (a pass over one job: read, create, patch, replace), `cleanup` (deleting:
cancel, refusal, a finished job's objects and retention), `conflicts` (the merge-patch conflict-retry loop),
`backend` (which plugin a job uses), `claims` (which task works on a job now), `passes` (a pass with its
bookkeeping: its result, status write and attempt row), `batch` (a bulk submit's jobs together), `coalesce`
(waiting single submits, and due clean-ups, of a cluster taken into one batch), `fanout` (a pass's independent
creates sent at once), `repairs` (the backoff of repairs that do not hold), `common` (reasons, tunables, the
exceptions that end a pass early).

Level-triggered and idempotent (controller-runtime style): the input is a job id; a pass reads the job's
objects (one LIST per kind by the job-UID label, or a slice of the resync's cluster-wide LISTs), builds the
desired objects from the job row (reconcile/desired.py), and then:

- creates what is missing, in dependency order: the root gang object, then (sent at once) the other gang objects
  and the headless Service, which need only the root's UID, then (at once) the Indexed Jobs, whose pods need every
  gang object (Workload -> PodGroup -> pods); with the root the only gang object, the Service goes with the Jobs.
  Every answer of a round is recorded before its first error ends the pass (later ones are named in the
  attempt's actions). A 409 AlreadyExists is never taken as success: the object is read and compared, and
  adopted only when its UID is the one recorded under its name, or, with none recorded, when its
  `gangweb.io/job-uid` label names this job and it carries gangweb's creation mark (`ownership.creation_mark`,
  stamped on every object gangweb creates), and it is not terminating (else NameConflict naming its UID / a
  countdown);
- updates drifted mutable fields in place with a merge patch carrying the read `resourceVersion`; on 409 it
  reads again and retries (MAX_CONFLICT_RETRIES); a repair something in the cluster keeps undoing is made again
  only after a growing wait, and the pass says `RepairNotHolding` (`repairs`);
- replaces the gang when a drifted field is immutable (always, for scheduling.k8s.io/v1alpha2), when a gang
  object of the current generation is terminating or missing beside the job's Jobs (deleted by hand, or by the
  garbage collector after its root), and when a partial gang is released (jobs/partial.py): deletes the
  Indexed Jobs, then the gang objects in reverse creation order, bumps `gang_generation` (so every name
  changes) and creates the new objects in order; a create answered 429 comes back after the server's
  Retry-After (`JobReconciler.throttled`);
- when it created an owner Job of a Scheduled or Running job (its objects vanished, or the gang was replaced),
  starts a new timeline attempt with a Dispatched entry, reason Recreated / Replaced, naming what it created;
- deletes the job's objects that are no longer desired (earlier generations), each with a UID precondition,
  and releases the backend's protection finalizer (v1alpha2 `podgroup-protection`) on its own terminating
  objects once no live pod references them;
- when the API server refuses for good to create one of them (400, 422, a 403 from admission: `CreateRefused`)
  ends the job Failed (reason CreateRefused, the object and the server's words in the message) and deletes every
  object already created for it, as a cancel does;
- gives every object of the job but the root one ownerReference, to the job's root object (the backend's
  `root_ref`, created first), and puts it back when it is removed by hand; an object whose reference names a root
  that was deleted is deleted too and the set created again (reconcile/owner_refs.py);
- keeps each Indexed Job's completions equal to its parallelism (both put back together: Indexed Jobs allow it);
- on cancel deletes every object of the job and ends it Cancelled; when the job has finished (Succeeded or
  Failed) and none of its pods is alive, deletes its gang objects and Service so they stop holding quota (the
  root with propagation Orphan, so the retained Jobs stay), and after the retention its Indexed Jobs and pods
  (reconcile/retention.py).

What a pass records (the sighting of the job's objects, a restart, Cancelled or Failed, an error, cleanup fields)
is collected in a `status.StatusUpdate` and written once at its end (`status.write`), only if it changed.
Every pass leaves a ReconcileAttempt row. Unreachable cluster, 401/403, 429 and 5xx raise TransientKubeError
after being recorded on the job (phase_reason "ClusterUnreachable", "Forbidden", ...); the Celery task retries
those with backoff. So does a create answered "namespace not found" (phase_reason "NamespaceNotFound"): the job's
namespace is missing in its cluster, and once someone creates it the next retry or resync dispatches the job.
400/422, a 403 from admission (quota, webhook, policy: it refuses the object, not gangweb) and name conflicts are
terminal: recorded, not retried; a create refused so fails the job (above).
"""
from .backend import backend_for, choose_backend, record_backends
from .batch import in_threads, reconcile_claimed, reconcile_many
from .coalesce import reconcile_cleanup, reconcile_submitted
from .common import Requeue, is_terminating, ref_of
from .passes import PassResult, reconcile_one, run_pass
from .reconciler import JobReconciler

__all__ = ("JobReconciler", "PassResult", "Requeue", "backend_for", "choose_backend", "in_threads", "is_terminating",
           "reconcile_claimed", "reconcile_cleanup", "reconcile_many", "reconcile_one", "reconcile_submitted",
           "record_backends", "ref_of", "run_pass")
