"""Two teams on one cluster, with every role, for the permission and hostile-input tests.

    team-a (parent) ── a-train (leaf, job a_job by a_sub), a-dev (leaf, empty)
    team-b (parent) ── b-train (leaf, job b_job by b_sub)
    clusters: local (both teams' leaves target it), spare (nobody's)
    templates: llm (shared), a-tmpl (team-a), b-tmpl (team-b)

Principals (the keys of `principals`): anon, admin (superuser), padmin (member of the platform-admins group),
a_admin (queue admin of team-a, cluster admin of local), a_sub (submitter on team-a through the group "team-a"),
a_view (viewer of team-a), b_sub (submitter on team-b through the group "team-b"), and tokens of a_sub: t_sub
(read+submit, scoped to a-train), t_read (read only), t_rev (revoked), t_exp (expired).
"""
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.services.jobs import lifecycle as job_service
from tests import builders


@dataclass
class Teams:
    """What the `teams` fixture made: objects by name, and an API client per principal."""

    objects: dict = field(default_factory=dict)
    clients: dict = field(default_factory=dict)

    def __getattr__(self, name):
        try:
            return self.objects[name]
        except KeyError:
            raise AttributeError(name) from None


PRINCIPALS = ["anon", "admin", "padmin", "a_admin", "a_sub", "a_view", "b_sub", "t_sub", "t_read", "t_rev", "t_exp"]


@pytest.fixture
def teams(db, enqueued, queue_syncs):
    """Build the two teams (see the module docstring) and return a Teams with a client per principal."""
    local, spare = builders.make_cluster("local"), builders.make_cluster("spare")
    team_a = builders.make_queue("team-a", allowed_namespaces=["default", "team-a"])
    team_b = builders.make_queue("team-b")
    a_train = builders.make_queue("a-train", parent=team_a, clusters=[local], allowed_namespaces=["team-a"])
    a_dev = builders.make_queue("a-dev", parent=team_a, clusters=[local])
    b_train = builders.make_queue("b-train", parent=team_b, clusters=[local])
    llm = builders.make_template("llm")
    a_tmpl = builders.make_template("a-tmpl")
    a_tmpl.template.queue = team_a
    a_tmpl.template.save()
    b_tmpl = builders.make_template("b-tmpl")
    b_tmpl.template.queue = team_b
    b_tmpl.template.save()

    from django.contrib.auth.models import User

    users = {
        "admin": User.objects.create_superuser("admin", "admin@example.com", "pw-admin"),
        "padmin": builders.make_user("padmin", groups=["platform-admins"]),
        "a_admin": builders.make_user("a_admin"),
        "a_sub": builders.make_user("a_sub", groups=["team-a"]),
        "a_view": builders.make_user("a_view"),
        "b_sub": builders.make_user("b_sub", groups=["team-b"]),
    }
    builders.grant(team_a, "admin", user=users["a_admin"])
    builders.grant(local, "admin", user=users["a_admin"])
    builders.grant(team_a, "submitter", group="team-a")
    builders.grant(team_a, "viewer", user=users["a_view"])
    builders.grant(team_b, "submitter", group="team-b")

    a_job = job_service.submit(users["a_sub"], builders.submit_body(llm, a_train, local, name="a-job",
                                                                   namespace="team-a"))[0]
    b_job = job_service.submit(users["b_sub"], builders.submit_body(llm, b_train, local, name="b-job"))[0]

    now = timezone.now()
    tokens = {
        "t_sub": builders.make_token(users["a_sub"], ["read", "submit"], [a_train]),
        "t_read": builders.make_token(users["a_sub"], ["read"]),
        "t_rev": builders.make_token(users["a_sub"], ["read", "submit", "cancel"], revoked_at=now),
        "t_exp": builders.make_token(users["a_sub"], ["read", "submit", "cancel"], expires_at=now - timedelta(1)),
    }
    clients = {"anon": APIClient()}
    for name, user in users.items():
        clients[name] = APIClient()
        clients[name].force_authenticate(user)
    for name, plaintext in tokens.items():
        clients[name] = APIClient(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    objects = dict(local=local, spare=spare, team_a=team_a, team_b=team_b, a_train=a_train, a_dev=a_dev,
                   b_train=b_train, llm=llm, a_tmpl=a_tmpl, b_tmpl=b_tmpl, a_job=a_job, b_job=b_job,
                   tokens=tokens, **users)
    return Teams(objects=objects, clients=clients)
