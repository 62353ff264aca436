"""Write the audit log (models.AuditEvent). Called by the services inside the transaction of the change they log.

Actions are "<object type>.<verb>": job.submit, job.cancel, job.update, job.resubmit, template.create,
template.version, template.retire, template.update, template.policy (level or exceptions), template.delete,
queue.create, queue.update, queue.delete, cluster.create, cluster.update, cluster.delete, token.create,
token.revoke. `details` never holds a secret.
"""
from __future__ import annotations

from ...db.copy_rows import insert_rows, new_instances
from ...models import AuditEvent
from .roles import token_of


def _actor(user) -> dict:
    authenticated = user is not None and user.is_authenticated
    return {"actor": user if authenticated else None, "actor_name": user.get_username() if authenticated else "",
            "token": token_of(user)}


def event(user, action: str, obj, details: dict | None = None) -> AuditEvent:
    """An unsaved AuditEvent for `obj` (any model instance; its class name, pk and str are recorded)."""
    return AuditEvent(action=action, object_type=action.split(".", 1)[0], object_id=str(obj.pk or ""),
                      object_name=str(obj)[:300], details=details or {}, **_actor(user))


def record(user, action: str, obj, details: dict | None = None) -> AuditEvent:
    """Log one action on `obj` by `user` (and the token they used, if any). Returns the saved event."""
    entry = event(user, action, obj, details)
    entry.save()
    return entry


def record_many(user, action: str, objs, details: dict | None = None, copy: bool = False) -> None:
    """Log the same action on many objects in one statement (bulk submit). The actor is worked out once.
    `copy` writes with COPY on PostgreSQL (copy_rows.insert_rows; the events keep pk=None), else bulk_create."""
    actor, object_type = _actor(user), action.split(".", 1)[0]
    # By id and positionally (copy_rows.new_instances): keyword init with the related instances cost ~60 us each.
    by_id = {"actor_id": getattr(actor["actor"], "pk", None), "token_id": getattr(actor["token"], "pk", None),
             "actor_name": actor["actor_name"], "action": action, "object_type": object_type}
    events = new_instances(AuditEvent, [{**by_id, "object_id": str(o.pk or ""), "object_name": str(o)[:300],
                                         "details": details or {}} for o in objs])
    if copy:
        insert_rows(AuditEvent, events, need_pk=False)
    else:
        AuditEvent.objects.bulk_create(events)
