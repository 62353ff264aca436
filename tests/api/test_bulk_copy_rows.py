"""db/copy_rows.py: rows written by COPY (PostgreSQL) equal, field by field, what bulk_create writes; every
column of the table is written; a unique-constraint clash in a bulk submit is still a 409 naming the field, with
nothing written. Run on SQLite (insert_rows is bulk_create there) and on PostgreSQL (DATABASE_URL=postgres://...).
"""
from datetime import UTC, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.db import IntegrityError, connection, transaction

from scheduling.db import clock as dbclock
from scheduling.db.copy_rows import copy_fields, insert_rows
from scheduling.models import AuditEvent, GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db

# JSON that text-literal escaping could get wrong: quotes, backslashes, braces, commas, unicode, null, nesting.
AWKWARD = {"env": [{"name": "A", "value": 'say "hi", {x}\\n'}], "ünï": "日本", "none": None, "n": [1, 2.5, True],
           "nested": {"": {"a,b": "}{"}}}


def _jobs(prototype, user, prefix: str) -> list[GangJob]:
    """Three unsaved jobs with every kind of value: JSON (and SQL NULL vs JSON), aware timestamps in another
    zone, nullable foreign keys set and unset."""
    tz = dt_timezone(timedelta(hours=-7, minutes=-30))
    common = {"template_version_id": prototype.template_version_id, "queue_id": prototype.queue_id,
              "cluster_id": prototype.cluster_id, "resolved_spec": {**prototype.resolved_spec, "extra": AWKWARD}}
    return [
        GangJob(name=f"{prefix}-0", overrides=AWKWARD, why_pending=None, submitted_by=user,
                resubmitted_from=prototype, phase_changed_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=tz),
                finished_at=datetime(2026, 1, 2, 4, 0, tzinfo=UTC), priority_class_name="high",
                phase_message="line1\nline2\t\"q\"", gang_generation=3, spec_revision=7, **common),
        GangJob(name=f"{prefix}-1", why_pending={"reason": "quota", "detail": ["a", None]}, submitted_by=None,
                resubmitted_from=None, idempotency_key="k,\\\"", request_hash="0" * 64, **common),
        GangJob(name=f"{prefix}-2", observed=[], namespace="ns-ü", **common),
    ]


def _stored(model, pks, skip=("id", "uid", "name", "created_at", "updated_at", "recorded_at", "at")) -> list[dict]:
    columns = [f.attname for f in model._meta.concrete_fields if f.attname not in skip]
    rows = {row["pk"]: row for row in model.objects.filter(pk__in=pks).values("pk", *columns)}
    return [{k: v for k, v in rows[pk].items() if k != "pk"} for pk in pks]


def test_copy_writes_what_bulk_create_writes_field_by_field(setup, admin_user):
    prototype = builders.make_job(*setup, name="proto", user=admin_user)
    copied, created = _jobs(prototype, admin_user, "copy"), _jobs(prototype, admin_user, "bulk")
    before = datetime.now(UTC)
    before_on_db_clock = dbclock.now()  # updated_at is written on the database's clock (DbClockDateTimeField)
    insert_rows(GangJob, copied)
    GangJob.objects.bulk_create(created)

    assert all(j.pk for j in copied) and len({j.pk for j in copied}) == 3
    assert len({j.pk for j in copied} | {j.pk for j in created}) == 6
    assert _stored(GangJob, [j.pk for j in copied]) == _stored(GangJob, [j.pk for j in created])
    first = GangJob.objects.get(pk=copied[0].pk)
    assert first.overrides == AWKWARD and first.resolved_spec["extra"] == AWKWARD
    assert first.phase_changed_at == datetime(2026, 1, 2, 10, 34, 5, 678901, tzinfo=UTC)
    assert first.resubmitted_from_id == prototype.pk and first.submitted_by_id == admin_user.pk
    assert GangJob.objects.filter(pk=copied[0].pk, why_pending__isnull=True).exists()  # SQL NULL, not JSON null
    assert GangJob.objects.get(pk=copied[2].pk).observed == []
    for job in GangJob.objects.filter(pk__in=[j.pk for j in copied]):  # auto_now(_add) set, as save() would
        assert job.created_at >= before and job.updated_at >= before_on_db_clock and job.uid == next(
            j.uid for j in copied if j.pk == job.pk)


def test_rows_copied_without_their_pk_get_one_from_the_table_and_match_bulk_create(setup, admin_user):
    jobs = [builders.make_job(*setup, user=admin_user) for _ in range(2)]
    at = datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)

    def rows(job):  # one job each: a job has at most one transition per phase
        return ([PhaseTransition(job=job, phase="Running", at=at, source="gangweb", reason="R", message='m "x"')],
                [AuditEvent(action="job.submit", object_type="job", object_id=str(job.pk), object_name="j",
                            details=AWKWARD, actor=admin_user, actor_name="admin", token=None)])
    (t1, a1), (t2, a2) = rows(jobs[0]), rows(jobs[1])
    insert_rows(PhaseTransition, t1, need_pk=False)
    insert_rows(AuditEvent, a1, need_pk=False)
    PhaseTransition.objects.bulk_create(t2)
    AuditEvent.objects.bulk_create(a2)

    transitions = list(PhaseTransition.objects.filter(reason="R").order_by("pk").values())
    events = list(AuditEvent.objects.filter(action="job.submit", object_name="j").order_by("pk").values())
    assert len(transitions) == len(events) == 2
    assert transitions[0]["id"] != transitions[1]["id"] and events[0]["id"] != events[1]["id"]
    for row in transitions:
        del row["id"], row["recorded_at"]  # auto_now_add: the moment of the insert
    for row in events:
        del row["id"], row["at"]
    assert [t.pop("job_id") for t in transitions] == [j.pk for j in jobs]
    assert [e.pop("object_id") for e in events] == [str(j.pk) for j in jobs]
    assert transitions[0] == transitions[1] and transitions[0]["at"] == at
    assert events[0] == events[1] and events[0]["details"] == AWKWARD


@pytest.mark.parametrize("model", [GangJob, PhaseTransition, AuditEvent])
def test_the_copy_writes_every_column_of_the_table(model):
    """Fails when a column exists in the table (e.g. a field added by a migration) that the COPY would not write."""
    with connection.cursor() as cursor:
        table = [c.name for c in connection.introspection.get_table_description(cursor, model._meta.db_table)]
    assert sorted(f.column for f in copy_fields(model)) == sorted(table)
    assert sorted(f.column for f in copy_fields(model, need_pk=False)) == sorted(set(table) - {"id"})


def test_a_copy_that_breaks_a_unique_constraint_raises_integrity_error_and_writes_nothing(setup, admin_user):
    prototype = builders.make_job(*setup, name="taken", user=admin_user)
    clash = GangJob(name="taken", template_version_id=prototype.template_version_id, queue_id=prototype.queue_id,
                    cluster_id=prototype.cluster_id, resolved_spec={})
    fresh = GangJob(name="fresh", template_version_id=prototype.template_version_id, queue_id=prototype.queue_id,
                    cluster_id=prototype.cluster_id, resolved_spec={})
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(GangJob, [fresh, clash])
    assert list(GangJob.objects.values_list("name", flat=True)) == ["taken"]


def test_a_bulk_submit_clashing_with_an_active_name_is_409_naming_it_and_writes_nothing(api, setup):
    taken = builders.submit_body(*setup, name="taken")
    assert api.post("/api/v1/jobs/", taken, format="json").status_code == 201
    counts = (GangJob.objects.count(), PhaseTransition.objects.count(), AuditEvent.objects.count())
    bodies = [builders.submit_body(*setup, name=f"fresh-{i}") for i in range(20)] + [dict(taken)]
    r = api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json")
    assert r.status_code == 409
    assert r.data == {"jobs[20].name": ["an active job 'taken' already exists in namespace 'default' of that cluster"]}
    assert (GangJob.objects.count(), PhaseTransition.objects.count(), AuditEvent.objects.count()) == counts
    r = api.post("/api/v1/jobs/bulk/", {"jobs": bodies[:20]}, format="json")  # the transaction is usable again
    assert r.status_code == 201 and r.data["count"] == 20
    assert PhaseTransition.objects.filter(job__name__startswith="fresh-").count() == 20
    assert AuditEvent.objects.filter(action="job.submit", object_name__contains="fresh-").count() == 20


def test_only_fields_known_to_write_values_unchanged_skip_djangos_prepare():
    """A field subclass (an encrypted text field encrypts in get_prep_value) always takes Django's path; so does
    JSON; a foreign key takes its target's rule."""
    from scheduling.db.copy_rows import _pass_through
    from scheduling.models import Cluster
    from scheduling.models.fields import EncryptedTextField

    encrypted = next(f for f in Cluster._meta.concrete_fields if isinstance(f, EncryptedTextField))
    assert _pass_through(encrypted) == ()
    assert _pass_through(GangJob._meta.get_field("resolved_spec")) == ()
    assert _pass_through(GangJob._meta.get_field("name")) == (str, type(None))
    assert _pass_through(GangJob._meta.get_field("queue")) == (int, type(None))


def test_new_instances_equal_keyword_init_with_defaults_and_refuse_unknown_names():
    from scheduling.db.copy_rows import new_instances

    values = {"action": "job.submit", "object_type": "job", "object_id": "7", "actor_id": None}
    built, = new_instances(AuditEvent, [values])
    expected = AuditEvent(**values)
    for field in AuditEvent._meta.concrete_fields:
        assert getattr(built, field.attname) == getattr(expected, field.attname), field.name
    assert built.details == {} and built.details is not new_instances(AuditEvent, [values])[0].details
    assert built._state.adding and built.pk is None
    with pytest.raises(TypeError, match="object_nme"):
        new_instances(AuditEvent, [{"object_nme": "x"}])
