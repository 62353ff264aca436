"""What the access checks read from the database (services/access/roles.py decides with it).

- `Principal`: everything about one user the checks ask: whether they are in the platform-admin group, their queue
  grants and cluster grants (their own and their groups', the strongest role per object) and, for an API token,
  the queues the token names.
- `Tree`: every queue's parent and the clusters each queue names.

`read(user, token, admin_group, with_tree)` reads a principal, and the tree too when asked, in **one** statement: a
UNION ALL of the pieces, each row tagged with its kind (`KINDS`). `read_tree()` reads the tree alone. Nothing here
is kept between calls: roles.py memoizes the answers inside one `cached()` block only (grants change between
requests).

Why SQL text rather than querysets (as services/jobs/lookups.py): a team member's single submit is CPU-bound on
the web workers, and building and compiling the five querysets this replaced (group check, queue tree, queue
grants, queue-cluster links, cluster grants) cost ~2.5 ms of Python per submit, several times the statements' own
cost. The text is built once per shape from the models' metadata (tables, columns, quoting). Standard SQL only
(UNION ALL, IN with a subquery, CAST): the same text runs on PostgreSQL and SQLite. The NULLs that fill the
columns a kind does not use are CAST: PostgreSQL resolves a UNION's column types pair by pair, and two bare NULLs
would make a text column that the ids of a later branch cannot join.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connections, router

from ...choices import ROLE_RANK
from ...models import ApiToken, ClusterGrant, QueueGrant, QueuePolicy

# The kind column of `read`'s rows: (kind, id, second id, role).
QUEUE_GRANT = "q"  # (queue id, -, role): a grant to the user or to one of their groups
CLUSTER_GRANT = "c"  # (cluster id, -, role): likewise
ADMIN_GROUP = "a"  # (group id, -, -): the user is in the platform-admin group
TOKEN_QUEUE = "s"  # (queue id, -, -): a queue the token is scoped to
QUEUE = "t"  # (queue id, parent id or NULL, -): one row per queue
QUEUE_CLUSTER = "l"  # (queue id, cluster id, -): a cluster the queue names
KINDS = (QUEUE_GRANT, CLUSTER_GRANT, ADMIN_GROUP, TOKEN_QUEUE, QUEUE, QUEUE_CLUSTER)


def strongest(a: str | None, b: str | None) -> str | None:
    """The stronger of two GrantRole values (None: no role), by choices.ROLE_RANK."""
    if a is None:
        return b
    if b is None:
        return a
    return a if ROLE_RANK[a] >= ROLE_RANK[b] else b


@dataclass(frozen=True)
class Principal:
    """What the database says about one user (and the token they act through), as `read` found it."""

    in_admin_group: bool = False
    queue_grants: dict[int, str] = field(default_factory=dict)  # queue id -> strongest GrantRole granted on it
    cluster_grants: dict[int, str] = field(default_factory=dict)  # cluster id -> strongest GrantRole
    token_queues: frozenset[int] = frozenset()  # the token's queues (empty: no token, or one naming none)


class Tree:
    """Every queue's parent (`parents`: {queue id: parent id or None}) and the clusters each queue names
    (`clusters`: {queue id: {cluster id}}, queues naming none left out). A cycle of parents (which the queue
    service refuses, but a hand-edited database may hold) ends every walk here rather than looping."""

    def __init__(self, parents: dict[int, int | None], clusters: dict[int, set[int]]):
        self.parents = parents
        self.clusters = clusters

    @functools.cached_property
    def children(self) -> dict[int, list[int]]:
        """{queue id: ids of the queues whose parent it is}."""
        out: dict[int, list[int]] = {}
        for queue_id, parent_id in self.parents.items():
            if parent_id is not None:
                out.setdefault(parent_id, []).append(queue_id)
        return out

    @functools.cached_property
    def parent_ids(self) -> set[int]:
        """Ids of the queues that have children (None among them when some queue is at the top level)."""
        return set(self.parents.values())

    def below(self, roots) -> set[int]:
        """The queues of the tree among `roots` or under one of them, at any depth: the queues whose walk up
        the parents meets a root."""
        found: set[int] = set()
        stack = list(roots)
        while stack:
            node = stack.pop()
            if node in found:
                continue
            found.add(node)
            stack.extend(self.children.get(node, ()))
        return found & self.parents.keys()


def read(user, token, admin_group: str, with_tree: bool) -> tuple[Principal, Tree | None]:
    """(principal, tree) of `user` (a saved user) acting through `token` (an ApiToken, or None), in one statement.

    `admin_group`: the platform-admin group's name ("" or None: nobody is in it, and it is not asked). The tree is
    read only `with_tree`, else None. Group grants count for the groups the user is in at the time of the read.
    """
    db = router.db_for_read(QueueGrant)
    sql = _sql(db, bool(admin_group), token is not None, with_tree)
    params = [user.pk, user.pk, user.pk, user.pk]
    if admin_group:
        params += [user.pk, admin_group]
    if token is not None:
        params.append(token.pk)
    queue_grants: dict[int, str] = {}
    cluster_grants: dict[int, str] = {}
    token_queues: set[int] = set()
    in_admin_group = False
    parents: dict[int, int | None] = {}
    clusters: dict[int, set[int]] = {}
    with connections[db].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for kind, first, second, role in rows:
        if kind == QUEUE:
            parents[first] = second
        elif kind == QUEUE_CLUSTER:
            clusters.setdefault(first, set()).add(second)
        elif kind == QUEUE_GRANT:
            queue_grants[first] = strongest(queue_grants.get(first), role)
        elif kind == CLUSTER_GRANT:
            cluster_grants[first] = strongest(cluster_grants.get(first), role)
        elif kind == ADMIN_GROUP:
            in_admin_group = True
        elif kind == TOKEN_QUEUE:
            token_queues.add(first)
    principal = Principal(in_admin_group, queue_grants, cluster_grants, frozenset(token_queues))
    return principal, Tree(parents, clusters) if with_tree else None


def read_tree() -> Tree:
    """Every queue's parent and the clusters each names (`Tree`), in one statement."""
    db = router.db_for_read(QueuePolicy)
    parents: dict[int, int | None] = {}
    clusters: dict[int, set[int]] = {}
    with connections[db].cursor() as cursor:
        cursor.execute(_tree_sql(db))
        rows = cursor.fetchall()
    for kind, first, second in rows:
        if kind == QUEUE:
            parents[first] = second
        else:
            clusters.setdefault(first, set()).add(second)
    return Tree(parents, clusters)


# --- statements ---------------------------------------------------------------------------------------------------

_NO_ID = "CAST(NULL AS BIGINT)"
_NO_ROLE = "CAST(NULL AS VARCHAR(16))"


def _tree_branches(db: str, role_column: bool) -> list[str]:
    qn = connections[db].ops.quote_name
    q = QueuePolicy._meta
    links = QueuePolicy._meta.get_field("clusters")
    tail = f", {_NO_ROLE}" if role_column else ""
    return [
        f"SELECT '{QUEUE}', q.{qn(q.pk.column)}, q.{qn(q.get_field('parent').column)}{tail} FROM {qn(q.db_table)} q",
        f"SELECT '{QUEUE_CLUSTER}', l.{qn(links.m2m_column_name())}, l.{qn(links.m2m_reverse_name())}{tail} "
        f"FROM {qn(links.m2m_db_table())} l",
    ]


@functools.lru_cache(maxsize=32)
def _tree_sql(db: str) -> str:
    """The tree's rows: (kind, queue id, parent or cluster id)."""
    return " UNION ALL ".join(_tree_branches(db, role_column=False))


@functools.lru_cache(maxsize=32)
def _sql(db: str, admin_group: bool, token: bool, with_tree: bool) -> str:
    """The principal's rows (and the tree's `with_tree`): (kind, id, second id, role). Parameters: the user's id
    four times (queue grants: own and groups'; cluster grants: likewise), then with `admin_group` the user's id and
    the group's name, then with `token` the token's id."""
    qn = connections[db].ops.quote_name
    groups = get_user_model()._meta.get_field("groups")
    member = (f"SELECT m.{qn(groups.m2m_reverse_name())} FROM {qn(groups.m2m_db_table())} m "
              f"WHERE m.{qn(groups.m2m_column_name())} = %s")

    def grants(kind: str, model, target: str) -> str:
        meta = model._meta
        target, role = qn(meta.get_field(target).column), qn(meta.get_field("role").column)
        return (f"SELECT '{kind}', g.{target}, {_NO_ID}, g.{role} "
                f"FROM {qn(meta.db_table)} g WHERE g.{qn(meta.get_field('user').column)} = %s "
                f"OR g.{qn(meta.get_field('group').column)} IN ({member})")

    branches = [grants(QUEUE_GRANT, QueueGrant, "queue"), grants(CLUSTER_GRANT, ClusterGrant, "cluster")]
    if admin_group:
        group = Group._meta
        branches.append(
            f"SELECT '{ADMIN_GROUP}', m.{qn(groups.m2m_reverse_name())}, {_NO_ID}, {_NO_ROLE} "
            f"FROM {qn(groups.m2m_db_table())} m INNER JOIN {qn(group.db_table)} ag "
            f"ON ag.{qn(group.pk.column)} = m.{qn(groups.m2m_reverse_name())} "
            f"WHERE m.{qn(groups.m2m_column_name())} = %s AND ag.{qn(group.get_field('name').column)} = %s")
    if token:
        scope = ApiToken._meta.get_field("queues")
        branches.append(
            f"SELECT '{TOKEN_QUEUE}', s.{qn(scope.m2m_reverse_name())}, {_NO_ID}, {_NO_ROLE} "
            f"FROM {qn(scope.m2m_db_table())} s WHERE s.{qn(scope.m2m_column_name())} = %s")
    if with_tree:
        branches += _tree_branches(db, role_column=True)
    return " UNION ALL ".join(branches)
