"""The access checks read everything about a user and the queue tree in one statement (services/access/facts.py),
and give the answers of the rules in services/access/roles.py's docstring: a grant reaches its queue and every queue
below it, group grants count, a token narrows its owner, a cycle of parents ends every walk, inactive users have
nothing. Each rule is checked on a case of its own, and on random trees against the rules written out plainly."""
import random

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext, override_settings

from scheduling.choices import ROLE_RANK
from scheduling.models import ApiToken, Cluster, ClusterGrant, QueueGrant, QueuePolicy
from scheduling.services.access import roles as access
from scheduling.services.errors import NotFound, PermissionDenied
from tests import builders

pytestmark = pytest.mark.django_db


def token_for(user, actions=("read", "submit"), queues=()):
    """`user` acting through a new API token scoped to `queues` (as api/authentication.py sets it)."""
    token = ApiToken.objects.create(owner=user, name="t", lookup=f"l{ApiToken.objects.count()}", secret_hash="0" * 64,
                                    actions=list(actions))
    token.queues.set(queues)
    user.api_token = token
    return user


def cluster_ids(user) -> set[int]:
    return set(access.visible_clusters(user, Cluster.objects.all()).values_list("pk", flat=True))


def test_a_group_grant_on_a_parent_reaches_the_grandchildren_and_the_strongest_grant_wins():
    org = builders.make_queue("org")
    team = builders.make_queue("team", parent=org)
    leaf = builders.make_queue("leaf", parent=team)
    other = builders.make_queue("other")
    user = builders.make_user("ann", groups=["team-a"])
    builders.grant(org, "viewer", group="team-a")
    builders.grant(team, "submitter", user=user)
    builders.grant(leaf, "viewer", group="team-a")  # weaker than the submitter role inherited from `team`

    assert access.queue_roles(user) == {org.pk: "viewer", team.pk: "submitter", leaf.pk: "submitter"}
    assert access.visible_queue_ids(user) == {org.pk, team.pk, leaf.pk}
    access.check_submit(user, leaf)
    with pytest.raises(PermissionDenied):
        access.check_submit(user, org)
    with pytest.raises(ValidationError):
        access.named_queue(user, other, "other")


def test_a_grant_below_shows_the_queues_above_but_gives_no_role_on_them():
    org = builders.make_queue("org")
    leaf = builders.make_queue("leaf", parent=org)
    user = builders.make_user("ann")
    builders.grant(leaf, "admin", user=user)

    assert access.queue_roles(user) == {leaf.pk: "admin"}
    assert access.visible_queue_ids(user) == {org.pk, leaf.pk}


def test_a_token_keeps_only_the_queues_under_its_scope_and_never_manages():
    org = builders.make_queue("org")
    a, b = builders.make_queue("a", parent=org), builders.make_queue("b", parent=org)
    a_leaf = builders.make_queue("a-leaf", parent=a)
    user = builders.make_user("ann")
    builders.grant(org, "admin", user=user)

    assert access.queue_roles(user) == dict.fromkeys([org.pk, a.pk, b.pk, a_leaf.pk], "admin")
    token_for(user, queues=[a])
    assert access.queue_roles(user) == {a.pk: "submitter", a_leaf.pk: "submitter"}
    assert access.visible_queue_ids(user) == {org.pk, a.pk, a_leaf.pk}
    with pytest.raises(ValidationError):
        access.named_queue(user, b, "b")


def test_a_platform_admins_token_sees_every_cluster_and_submits_only_under_its_scope():
    org = builders.make_queue("org")
    a, b = builders.make_queue("a", parent=org), builders.make_queue("b", parent=org)
    lone = builders.make_cluster("lone")
    user = token_for(builders.make_user("pat", groups=["platform-admins"]), queues=[a])

    assert not access.is_platform_admin(user)
    assert access.sees_every_cluster(user)
    assert cluster_ids(user) == {lone.pk}
    assert access.queue_roles(user) == {a.pk: "submitter"}
    with pytest.raises(PermissionDenied):
        access.check_submit(user, b)


def test_a_cluster_is_seen_through_a_queues_link_or_a_grant_and_a_token_sees_no_grant():
    local, spare, granted, hidden = (builders.make_cluster(n) for n in ("local", "spare", "granted", "hidden"))
    team = builders.make_queue("team", clusters=[spare])
    leaf = builders.make_queue("leaf", parent=team, clusters=[local])
    builders.make_queue("theirs", clusters=[hidden])
    user = builders.make_user("ann", groups=["ops"])
    builders.grant(team, "viewer", user=user)
    builders.grant(granted, "viewer", group="ops")

    assert cluster_ids(user) == {local.pk, spare.pk, granted.pk}
    assert access.named_cluster(user, local, "local") == local
    with pytest.raises(ValidationError):
        access.named_cluster(user, hidden, "hidden")
    assert cluster_ids(token_for(user, queues=[leaf])) == {local.pk}


def test_a_leaf_queue_naming_no_cluster_shows_every_cluster_and_a_parent_naming_none_does_not():
    local, spare = builders.make_cluster("local"), builders.make_cluster("spare")
    team = builders.make_queue("team")
    leaf = builders.make_queue("leaf", parent=team, clusters=[local])
    user = builders.make_user("ann")
    builders.grant(team, "viewer", user=user)
    assert cluster_ids(user) == {local.pk}

    builders.make_queue("open", parent=team)  # a leaf below the grant that names no cluster
    assert cluster_ids(user) == {local.pk, spare.pk}
    assert leaf.pk in access.queue_roles(user)


def test_a_cycle_of_parents_ends_every_walk():
    a, b = builders.make_queue("a"), builders.make_queue("b")
    c = builders.make_queue("c", parent=b)
    QueuePolicy.objects.filter(pk=a.pk).update(parent=b)
    QueuePolicy.objects.filter(pk=b.pk).update(parent=a)  # a -> b -> a, c below b: the service refuses this
    user = builders.make_user("ann")
    builders.grant(a, "submitter", user=user)
    builders.grant(b, "viewer", user=user)

    assert access.queue_roles(user) == dict.fromkeys([a.pk, b.pk, c.pk], "submitter")
    assert access.visible_queue_ids(user) == {a.pk, b.pk, c.pk}
    assert access.queue_roles(token_for(user, queues=[c])) == {c.pk: "submitter"}


def test_an_inactive_user_has_no_role_even_in_the_platform_admin_group():
    team = builders.make_queue("team")
    user = builders.make_user("ann", groups=["platform-admins"], is_active=False)
    builders.grant(team, "admin", user=user)

    assert not access.is_platform_admin(user)
    assert access.queue_roles(user) == {}
    assert access.visible_queue_ids(user) == set()


def test_the_platform_admin_group_is_the_one_settings_name_and_an_empty_name_makes_nobody_admin():
    team = builders.make_queue("team")
    user = builders.make_user("ann", groups=["ops"])
    assert not access.is_platform_admin(user)
    with override_settings(GANGWEB_PLATFORM_ADMIN_GROUP="ops"):
        assert access.is_platform_admin(user)
        assert access.queue_roles(user) == {team.pk: "admin"}
    with override_settings(GANGWEB_PLATFORM_ADMIN_GROUP=""), CaptureQueriesContext(connection) as ctx:
        assert not access.is_platform_admin(user)
    assert len(ctx.captured_queries) == 0


def test_a_request_reads_once_and_the_next_request_sees_a_new_grant():
    local = builders.make_cluster("local")
    team = builders.make_queue("team", clusters=[local])
    leaf = builders.make_queue("leaf", parent=team, clusters=[local])
    user = builders.make_user("ann", groups=["team"])
    builders.grant(team, "viewer", group="team")
    with access.cached(), CaptureQueriesContext(connection) as ctx:
        assert not access.is_platform_admin(user)
        assert access.queue_roles(user) == {team.pk: "viewer", leaf.pk: "viewer"}
        access.named_queue(user, leaf, "leaf")
        assert len(cluster_ids(user)) == 1
        builders.grant(leaf, "submitter", user=user)
        assert access.queue_role(user, leaf) == "viewer"  # grants do not change within a request
    assert [q["sql"].split()[0] for q in ctx.captured_queries] == ["SELECT", "SELECT", "INSERT"]  # + the list
    with access.cached():
        assert access.queue_role(user, leaf) == "submitter"
    assert access.queue_role(user, leaf) == "submitter"  # outside a request: read at each call


def test_a_lone_admin_check_outside_a_request_does_not_read_the_queue_tree():
    builders.make_queue("team")
    user = builders.make_user("ann")
    with CaptureQueriesContext(connection) as ctx:
        assert not access.is_platform_admin(user)
    assert len(ctx.captured_queries) == 1
    assert QueuePolicy._meta.db_table not in ctx.captured_queries[0]["sql"]
    with CaptureQueriesContext(connection) as ctx:
        assert access.queue_roles(user) == {}
    assert len(ctx.captured_queries) == 1  # one call: its parts share one read


# --- random trees against the rules written out --------------------------------------------------------------

def rules_roles(user, token) -> dict[int, str]:
    """The roles by the rules, read with the ORM: the strongest grant met walking up from each queue (stopping at a
    repeat), then the token's scope (a queue whose walk up meets one of its queues) and cap."""
    if not user.is_active:
        return {}
    tree = dict(QueuePolicy.objects.values_list("id", "parent_id"))
    if user.is_superuser or user.is_staff or user.groups.filter(name="platform-admins").exists():
        roles = dict.fromkeys(tree, "admin")
    else:
        direct: dict[int, str] = {}
        for queue_id, role in QueueGrant.objects.filter(
                Q(user=user) | Q(group__in=user.groups.all())).values_list("queue_id", "role"):
            direct[queue_id] = max(direct.get(queue_id, role), role, key=ROLE_RANK.get)
        roles = {}
        for queue_id in tree:
            met, node, seen = [], queue_id, set()
            while node is not None and node not in seen:
                seen.add(node)
                met += [direct[node]] if node in direct else []
                node = tree.get(node)
            if met:
                roles[queue_id] = max(met, key=ROLE_RANK.get)
    if token is not None:
        scope = set(token.queues.values_list("id", flat=True))

        def in_scope(queue_id):
            node, seen = queue_id, set()
            while node is not None and node not in seen:
                if node in scope:
                    return True
                seen.add(node)
                node = tree.get(node)
            return False
        roles = {q: "submitter" if r == "admin" else r for q, r in roles.items() if not scope or in_scope(q)}
    return roles


def rules_clusters(user, token, roles) -> set[int]:
    """The clusters by the rules: those the queues with a role name, every cluster when one of them is a leaf
    naming none, and (without a token, for an active user) the cluster grants."""
    links = QueuePolicy.clusters.through.objects.filter(queuepolicy_id__in=roles)
    named = {}
    for queue_id, cluster_id in links.values_list("queuepolicy_id", "cluster_id"):
        named.setdefault(queue_id, set()).add(cluster_id)
    parents = set(QueuePolicy.objects.values_list("parent_id", flat=True))
    if set(roles) - parents - set(named):
        return set(Cluster.objects.values_list("pk", flat=True))
    ids = set().union(*named.values())
    if token is None and user.is_active:
        ids |= set(ClusterGrant.objects.filter(Q(user=user) | Q(group__in=user.groups.all())).values_list(
            "cluster_id", flat=True))
    return ids


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("through", ["session", "token"])
def test_random_trees_grants_and_tokens_give_the_answers_of_the_rules(seed, through):
    rng = random.Random(seed)
    clusters = [builders.make_cluster(f"c{i}") for i in range(4)]
    groups = [Group.objects.create(name=f"g{i}") for i in range(3)]
    queues: list[QueuePolicy] = []
    for i in range(14):
        parent = rng.choice(queues) if queues and rng.random() < 0.8 else None
        queues.append(builders.make_queue(f"q{i}", parent=parent, clusters=rng.sample(clusters, rng.randint(0, 2))))
    if seed % 3 == 0:  # a cycle the service would refuse, made behind its back
        QueuePolicy.objects.filter(pk=queues[0].pk).update(parent=queues[-1])
    user = builders.make_user("ann", is_active=seed % 7 != 6)
    user.groups.set(rng.sample(groups, rng.randint(0, 2)))
    if seed % 5 == 4:
        user.groups.add(Group.objects.create(name="platform-admins"))
    for queue in rng.sample(queues, 4):
        builders.grant(queue, rng.choice(list(ROLE_RANK)), user=user)
    for queue in rng.sample(queues, 4):
        builders.grant(queue, rng.choice(list(ROLE_RANK)), group=rng.choice(groups).name)
    builders.grant(rng.choice(clusters), "viewer", user=user)
    builders.grant(rng.choice(clusters), "admin", group=rng.choice(groups).name)
    token = None
    if through == "token":
        token = token_for(user, queues=rng.sample(queues, rng.randint(0, 2))).api_token

    roles = rules_roles(user, token)
    for memo in (access.cached(), _no_block()):
        with memo:
            assert access.queue_roles(user) == roles
            if not access.sees_every_cluster(user):
                assert cluster_ids(user) == rules_clusters(user, token, roles)


class _no_block:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_an_inactive_user_has_no_cluster_grant_either():
    """Like their queue grants and the admin group, an inactive user's cluster grants (own or a group's) count for
    nothing: no cluster seen, named or managed. (Logins refuse inactive users; this holds for any caller passing a
    stored user, as the webhook scan does.)"""
    mine, theirs = builders.make_cluster("mine"), builders.make_cluster("theirs")
    user = builders.make_user("ann", groups=["ops"], is_active=False)
    builders.grant(mine, "admin", user=user)
    builders.grant(theirs, "viewer", group="ops")

    for memo in (access.cached(), _no_block()):
        with memo:
            assert cluster_ids(user) == set()
            with pytest.raises(ValidationError):
                access.named_cluster(user, mine, "mine")
            with pytest.raises(NotFound):
                access.check_manage_cluster(user, mine)
