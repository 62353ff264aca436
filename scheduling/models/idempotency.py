"""What a bulk submit with an Idempotency-Key created, so a retry of it answers with the same jobs."""
from django.conf import settings
from django.db import models


class BulkSubmitKey(models.Model):
    """One bulk submit (POST /api/v1/jobs/bulk/) made with an `Idempotency-Key` header.

    - `idempotency_key` is the header's value, unique per submitter (a single submit keeps its key on the
      GangJob itself: `GangJob.idempotency_key`; services/jobs/lifecycle.py checks both, so one key is one request).
    - `request_hash` is `services.jobs.lifecycle.request_hash` of the body's job list: a retry with another body is
      refused.
    - `job_ids` are the created jobs' ids in request order (a list of ints), what a retry answers with.

    Only written when the header is given, in the transaction that creates the jobs: a bulk that failed leaves
    no key behind, so its corrected retry is a new request (draft-ietf-httpapi-idempotency-key-header §2.6).
    """

    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    idempotency_key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    job_ids = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submitted_by", "idempotency_key"],
                                               name="uniq_bulk_idempotency_key_per_submitter")]

    def __str__(self):
        return f"{self.submitted_by_id}:{self.idempotency_key}"
