"""Who may do what: the one place the API and the dashboard ask.

Roles (Django users and groups):
- **platform admin**: superusers, staff, and members of the group settings.GANGWEB_PLATFORM_ADMIN_GROUP
  (default "platform-admins"): everything.
- **queue grants** (`QueueGrant(queue, user | group, role)`) apply to the queue and every queue below it; the
  strongest grant wins:
  - viewer: read the queue, its jobs, its templates and the clusters it targets;
  - submitter: also submit jobs to it, and cancel, change or resubmit the jobs they submitted;
  - admin: also create, change and delete the queues below it, change its own display fields, manage its
    templates and cancel any job in it. A queue's quota, limits, weights, priority, parent, clusters and allowed
    namespaces are its share of the parent, so changing them needs admin on the parent (nobody raises their own
    quota).
- **cluster grants** (`ClusterGrant`): viewer sees the cluster; admin may change it (credentials included).
  Creating and deleting clusters, and top-level queues, is for platform admins.

An API token (set on the user as `user.api_token` by scheduling.api.authentication) narrows its owner: only the
token's queues (and those below them; all of the owner's when it names none), only its actions (read, submit,
cancel), and never any managing (queues, templates, clusters, tokens, audit log).

One answer everywhere (API and pages) for what a user cannot see or may not use:

- an object they cannot see (a job, queue, template or cluster) is 404, as one that does not exist: `visible_*`
  filter querysets and `check_read_*` raise `NotFound` (Django's Http404), so existence is never disclosed;
- one they can see but may not act on is 403: the other checks raise `PermissionDenied({field: message})`
  naming the role or token action the action needs (and what they have); a manage check of an object they cannot
  see is `NotFound` too;
- a queue, template or cluster they cannot see named in a request body is 400 with the message of an unknown
  name (`named_queue`, `named_template`, `named_cluster`), so a body cannot probe for names either.

Platform admins cost no query. Others cost one statement per request inside `cached()`: their grants, group
membership and token scope together with the queue tree and its cluster links (services/access/facts.py). Outside
`cached()`, one statement per call (two when an admin-group check alone came first).
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from ...choices import ROLE_RANK, GrantRole, TokenAction
from ..errors import NotFound, PermissionDenied
from . import facts
from .facts import strongest as _strongest

# Queue fields that are a queue's share of its parent: changing them needs admin on the parent.
SHARE_FIELDS = frozenset({
    "name", "parent", "priority", "gpu_quota", "gpu_limit", "gpu_over_quota_weight", "cpu_quota", "cpu_limit",
    "cpu_over_quota_weight", "memory_quota", "memory_limit", "memory_over_quota_weight", "clusters",
    "allowed_namespaces", "allowed_service_accounts", "pod_security_level",
})


# Per-call memo of the answers below, active only inside `cached()` (bulk submit asks the same thing 5,000 times).
_memo: ContextVar[dict | None] = ContextVar("gangweb_access_memo", default=None)


@contextlib.contextmanager
def cached():
    """Within this block, each user's roles are computed once (grants do not change mid-request)."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def _memoized(kind: str, user, compute):
    memo = _memo.get()
    if memo is None:
        with cached():  # one call's own reads are shared by its parts (the principal and the tree), then forgotten
            return compute()
    token = token_of(user)
    key = (kind, getattr(user, "pk", None), token.pk if token is not None else None)
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _authenticated(user) -> bool:
    return bool(user is not None and user.is_authenticated)


def token_of(user):
    """The ApiToken the request authenticated with, or None (session, basic auth, or no request)."""
    return getattr(user, "api_token", None)


_TREE_KEY = ("tree", None, None)  # the queue tree's memo entry: the same for every user


def _admin_group() -> str:
    return getattr(settings, "GANGWEB_PLATFORM_ADMIN_GROUP", "platform-admins")


def _principal(user) -> facts.Principal:
    """What the database says about `user` (facts.Principal), read once per `cached()` block. Inside a block the
    same statement brings the queue tree unless it is read already: a role question nearly always follows. A lone
    call outside any block (an admin-group or cluster-grant check) reads the principal alone."""
    with_tree = _memo.get() is not None
    return _memoized("principal", user, lambda: _read_principal(user, with_tree))


def _read_principal(user, with_tree: bool) -> facts.Principal:
    memo = _memo.get()  # set: _memoized runs this inside a block
    with_tree = with_tree and _TREE_KEY not in memo
    principal, tree = facts.read(user, token_of(user), _admin_group(), with_tree)
    if tree is not None:
        memo[_TREE_KEY] = tree
    return principal


def _tree() -> facts.Tree:
    """Every queue's parent and named clusters (facts.Tree), read once per `cached()` block."""
    memo = _memo.get()
    if memo is None:
        return facts.read_tree()
    if _TREE_KEY not in memo:
        memo[_TREE_KEY] = facts.read_tree()
    return memo[_TREE_KEY]


def _owner_is_platform_admin(user) -> bool:
    if not _authenticated(user) or not user.is_active:
        return False
    if user.is_superuser or user.is_staff:
        return True
    return bool(_admin_group()) and _principal(user).in_admin_group


def is_platform_admin(user) -> bool:
    """Superusers, staff and members of the platform-admin group, when not acting through an API token."""
    return token_of(user) is None and _owner_is_platform_admin(user)


def _token_allows(user, action: str) -> bool:
    token = token_of(user)
    return token is None or action in (token.actions or [])


def queue_roles(user) -> dict[int, str]:
    """{queue id: effective GrantRole} for `user`, with grants inherited down the queue tree and token scopes applied.

    Platform admins (and their tokens) get admin on every queue before token narrowing. Tokens are capped at
    submitter: they never manage anything.
    """
    return _memoized("queue-roles", user, lambda: _queue_roles(user))


def _queue_roles(user) -> dict[int, str]:
    if not _authenticated(user) or not user.is_active:
        return {}
    token = token_of(user)
    admin = _owner_is_platform_admin(user)
    principal = _principal(user) if token is not None or not admin else None  # with the tree: one statement
    if admin:
        roles = dict.fromkeys(_tree().parents, GrantRole.ADMIN.value)
    else:
        roles = {}
        # A grant reaches its queue and every queue below it (the queues whose walk up meets it; `below` stops
        # at a cycle); the strongest of those reaching a queue wins.
        for granted, role in principal.queue_grants.items():
            for queue_id in _tree().below((granted,)):
                roles[queue_id] = _strongest(roles.get(queue_id), role)
    if token is not None:
        if principal.token_queues:
            scope = _tree().below(principal.token_queues)
            roles = {q: r for q, r in roles.items() if q in scope}
        roles = {q: GrantRole.SUBMITTER.value if r == GrantRole.ADMIN else r for q, r in roles.items()}
    return roles


def queue_role(user, queue) -> str | None:
    """The effective role of `user` on one queue, or None."""
    if queue is None:
        return None
    return queue_roles(user).get(queue.pk)


def _at_least(role: str | None, wanted: str) -> bool:
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[wanted]


# --- jobs -------------------------------------------------------------------------------------------------------

def visible_jobs(user, queryset: QuerySet) -> QuerySet:
    """Restrict a GangJob queryset to the jobs `user` may read: those in queues where they have any role."""
    if not _authenticated(user) or not _token_allows(user, TokenAction.READ):
        return queryset.none()
    if is_platform_admin(user):
        return queryset
    return queryset.filter(queue_id__in=list(queue_roles(user)))


def _role_text(role: str | None) -> str:
    return f"you have {role}" if role else "you have no role on it"


def check_submit(user, queue, cluster=None) -> None:
    """Raise PermissionDenied({"queue": ...}) unless `user` may submit to `queue` (a queue they can see: callers
    resolve names with `named_queue` first). The message names what is missing: the token's `submit` action or
    the submitter role. `cluster`, if given, must be visible to them (ValidationError naming it, as
    `named_cluster`)."""
    if not _authenticated(user) or not _token_allows(user, TokenAction.SUBMIT):
        raise PermissionDenied({"queue": f"submitting to queue '{queue.name}' needs an API token with the "
                                         "'submit' action"})
    if is_platform_admin(user):
        return
    role = queue_role(user, queue)
    if not _at_least(role, GrantRole.SUBMITTER):
        raise PermissionDenied({"queue": f"submitting to queue '{queue.name}' needs the submitter role; "
                                         f"{_role_text(role)}"})
    if cluster is not None:
        named_cluster(user, cluster, cluster.name)


def named_queue(user, queue, name: str, field: str = "queue"):
    """`queue` (the QueuePolicy a request body names as `name`, or None when no queue has that name) when `user`
    may see it: it has a role on it, below it or, as a queue admin, above it (token scopes apply; the token's
    actions do not: a submit-only token names the queues it submits to). Else ValidationError({field: "no queue
    named '<name>'"}): the answer for a name that does not exist, so a body cannot probe for queues."""
    if queue is not None and _authenticated(user) and (is_platform_admin(user) or queue.pk in visible_queue_ids(user)):
        return queue
    raise ValidationError({field: f"no queue named '{name}'"})


def _check_own_or_admin(user, job, action: str, verb: str) -> None:
    if not _authenticated(user):
        raise PermissionDenied({"job": f"not allowed to {verb} this job"})
    if not _token_allows(user, action):
        raise PermissionDenied({"job": f"not allowed to {verb} this job: the API token lacks the '{action}' action"})
    if is_platform_admin(user):
        return
    role = queue_role(user, job.queue)
    own = job.submitted_by_id is not None and job.submitted_by_id == user.pk
    if not (_at_least(role, GrantRole.ADMIN) or (own and _at_least(role, GrantRole.SUBMITTER))):
        # Why, so a bulk cancel's refusals can be told apart: another's job, or a role too small for one's own.
        whose = "it is your job, but" if own else "it is not your job, and"
        raise PermissionDenied({"job": f"not allowed to {verb} this job: only its submitter (with the submitter "
                                       f"role) or an admin of queue '{job.queue.name}' may; {whose} "
                                       f"{_role_text(role)} on that queue"})


def check_cancel(user, job) -> None:
    """Raise PermissionDenied unless `user` may cancel `job`: their own job as submitter, or any as queue admin."""
    _check_own_or_admin(user, job, TokenAction.CANCEL, "cancel")


def check_resubmit(user, job) -> None:
    """Raise PermissionDenied unless `user` may resubmit `job`: the submitter role on its queue (403 naming
    `queue`, as a submit), and then their own job, or any as queue admin (403 naming `job`)."""
    check_submit(user, job.queue)
    _check_own_or_admin(user, job, TokenAction.SUBMIT, "resubmit")


def check_update_job(user, job) -> None:
    """Raise PermissionDenied unless `user` may change `job`'s queue or priority (same rule as cancel; token
    action "submit")."""
    _check_own_or_admin(user, job, TokenAction.SUBMIT, "change")


# --- queues -----------------------------------------------------------------------------------------------------

def visible_queues(user, queryset: QuerySet) -> QuerySet:
    """Queues `user` has a role on, plus their ancestors (so the tree above a team's queue is visible)."""
    if not _authenticated(user) or not _token_allows(user, TokenAction.READ):
        return queryset.none()
    if is_platform_admin(user):
        return queryset
    return queryset.filter(pk__in=visible_queue_ids(user))


def visible_queue_ids(user) -> set[int]:
    """Ids of the queues `user` has a role on and of their ancestors (no token-action check)."""
    return _memoized("queue-ids", user, lambda: _visible_queue_ids(user))


def _visible_queue_ids(user) -> set[int]:
    roles = queue_roles(user)
    tree = _tree().parents if roles else {}
    ids: set[int] = set()
    for queue_id in roles:
        node = queue_id
        while node is not None and node not in ids:
            ids.add(node)
            node = tree.get(node)
    return ids


def queue_tree_filter(user) -> set[int] | None:
    """The `visible` argument of services.queues.payloads.queue_tree() for `user`: ids of the queues they may see, or
    None for every queue (platform admins, no query)."""
    if is_platform_admin(user):
        return None
    from ...models import QueuePolicy

    return set(visible_queues(user, QueuePolicy.objects.all()).values_list("id", flat=True))


def check_read_queue(user, queue) -> None:
    """Raise NotFound (404, as for a queue that does not exist) unless the queue is visible to `user`."""
    if not visible_queues(user, type(queue).objects.filter(pk=queue.pk)).exists():
        raise NotFound(queue)


def check_create_queue(user, parent) -> None:
    """Top-level queues are for platform admins; a child queue needs admin on its parent."""
    if is_platform_admin(user):
        return
    if parent is None or token_of(user) is not None or not _at_least(queue_role(user, parent), GrantRole.ADMIN):
        raise PermissionDenied({"parent": "creating a queue here needs admin on its parent queue"})


def check_manage_queue(user, queue, changed: set[str] | frozenset = frozenset(), new_parent=None, *,
                       moved: bool = False) -> None:
    """Raise PermissionDenied unless `user` may change `queue`'s fields named in `changed`.

    Display fields need admin on the queue; SHARE_FIELDS need admin on its parent; moving it (`moved`) needs the
    rights at the destination too: admin on `new_parent`, or a platform admin when `new_parent` is None (the top
    level, where no ancestor's limit or namespaces bound the queue any more: issue 15, H2).
    """
    if is_platform_admin(user):
        return
    role = queue_role(user, queue)
    if queue.pk not in visible_queue_ids(user):
        raise NotFound(queue)
    if token_of(user) is not None or not _at_least(role, GrantRole.ADMIN):
        raise PermissionDenied({"queue": f"managing queue '{queue.name}' needs the admin role; {_role_text(role)}"})
    share = sorted(set(changed) & SHARE_FIELDS)
    if share and not _at_least(queue_role(user, queue.parent), GrantRole.ADMIN):
        raise PermissionDenied({share[0]: f"changing {', '.join(share)} of queue '{queue.name}' needs admin on "
                                          "its parent queue"})
    if moved and new_parent is None:
        raise PermissionDenied({"parent": f"moving queue '{queue.name}' to the top level needs a platform admin"})
    if new_parent is not None and not _at_least(queue_role(user, new_parent), GrantRole.ADMIN):
        raise PermissionDenied({"parent": f"not allowed to move a queue under '{new_parent.name}'"})


def check_queue_scope(user, parent, clusters=None, namespaces=None, service_accounts=None) -> None:
    """A queue made or changed by a queue admin stays inside its parent: its clusters are among the parent's (or,
    when the parent names none, among those the user can see), and its namespaces and service accounts are among
    the parent's (an empty list allows none: podspec/rules.py). Raises PermissionDenied naming the field.

    Without this, a team admin could attach a cluster or namespace nobody gave them to a new child queue.
    """
    if is_platform_admin(user):
        return
    if clusters is not None:
        parent_clusters = {c.pk: c.name for c in parent.clusters.all()} if parent is not None else {}
        if parent_clusters and not clusters:  # an empty list means every cluster
            raise PermissionDenied({"clusters": "name the clusters of this queue, among its parent's: "
                                                + ", ".join(sorted(parent_clusters.values()))})
        allowed = set(parent_clusters) or _memoized("cluster-ids", user, lambda: _visible_cluster_ids(user))
        outside = sorted(c.name for c in clusters if c.pk not in allowed)
        if outside:
            raise PermissionDenied({"clusters": f"not allowed to use cluster '{outside[0]}' in this queue"})
    for name, asked in (("allowed_namespaces", namespaces), ("allowed_service_accounts", service_accounts)):
        if asked is None or parent is None:
            continue
        theirs = getattr(parent, name) or []
        outside = [n for n in asked if n not in theirs]
        if outside:
            raise PermissionDenied({name: f"'{outside[0]}' is not among the parent queue's "
                                          f"{name.split('_', 1)[1].replace('_', ' ')} ({', '.join(theirs) or 'none'})"})


def check_delete_queue(user, queue) -> None:
    """Deleting a queue needs admin on its parent (platform admin for a top-level queue)."""
    if is_platform_admin(user):
        return
    if token_of(user) is not None or not _at_least(queue_role(user, queue.parent), GrantRole.ADMIN):
        raise PermissionDenied({"queue": f"deleting queue '{queue.name}' needs admin on its parent queue"})


# --- templates --------------------------------------------------------------------------------------------------


# --- clusters ---------------------------------------------------------------------------------------------------

def _cluster_grant_roles(user) -> dict[int, str]:
    """{cluster id: strongest GrantRole} of `user`'s cluster grants (own and groups'); none for an inactive user,
    as for queue grants."""
    if not _authenticated(user) or not user.is_active:
        return {}
    return _principal(user).cluster_grants


def visible_clusters(user, queryset: QuerySet) -> QuerySet:
    """Clusters `user` has a grant on, plus those the queues they have a role on take jobs on: the clusters a queue
    names, or every cluster for a leaf queue that names none (as `Lookups.takes` reads it). A token
    sees only its queues' clusters (no cluster grants); a platform admin's token, every cluster."""
    if not _authenticated(user) or not _token_allows(user, TokenAction.READ):
        # A token without `read` lists no cluster (health, versions, served APIs are read access; issue 32 row 9).
        # Submitting names a cluster through `named_cluster`, which does not need `read`.
        return queryset.none()
    if sees_every_cluster(user):
        return queryset
    return queryset.filter(pk__in=_memoized("cluster-ids", user, lambda: _visible_cluster_ids(user)))


def sees_every_cluster(user) -> bool:
    """Platform admins and their tokens see every cluster, whichever clusters the queues name."""
    return is_platform_admin(user) or (token_of(user) is not None and _owner_is_platform_admin(user))


def _visible_cluster_ids(user) -> set[int]:
    """Ids of the clusters `visible_clusters` shows to a user who is not a platform admin (nor their token): the
    queue-cluster links come with the queue tree; one more query only when one of their queues names no cluster."""
    from ...models import Cluster

    queue_ids = set(queue_roles(user))
    ids: set[int] = set()
    if queue_ids:
        tree = _tree()
        if queue_ids - tree.parent_ids - tree.clusters.keys():
            # A leaf queue naming no cluster takes jobs on every cluster: its viewers see them all. A parent naming
            # none takes no jobs: its viewers see its children's clusters (roles reach the children, so they are in
            # queue_ids), not every cluster.
            return set(Cluster.objects.values_list("pk", flat=True))
        for queue_id in queue_ids:
            ids |= tree.clusters.get(queue_id, set())
    if token_of(user) is None:
        ids |= set(_cluster_grant_roles(user))
    return ids


def check_read_cluster(user, cluster) -> None:
    """Raise NotFound (404, as for a cluster that does not exist) unless the cluster is visible to `user`."""
    if not visible_clusters(user, type(cluster).objects.filter(pk=cluster.pk)).exists():
        raise NotFound(cluster)


def named_cluster(user, cluster, name: str, field: str = "cluster"):
    """`cluster` (what a request body names as `name`, or None) when `user` may see it; else
    ValidationError({field: "no cluster named '<name>'"}), the answer for an unknown name."""
    if cluster is not None and _authenticated(user) and (sees_every_cluster(user) or cluster.pk in _memoized(
            "cluster-ids", user, lambda: _visible_cluster_ids(user))):
        return cluster
    raise ValidationError({field: f"no cluster named '{name}'"})


def check_manage_cluster(user, cluster) -> None:
    """Changing a cluster (credentials included) needs a cluster admin grant or platform admin; NotFound when
    `user` cannot even see it."""
    if is_platform_admin(user):
        return
    if not visible_clusters(user, type(cluster).objects.filter(pk=cluster.pk)).exists():
        raise NotFound(cluster)
    if token_of(user) is not None or not _at_least(_cluster_grant_roles(user).get(cluster.pk), GrantRole.ADMIN):
        raise PermissionDenied({"cluster": f"not allowed to manage cluster '{cluster.name}'"})


def check_platform_admin(user, what: str = "this") -> None:
    """Creating or deleting clusters and reading the audit log: platform admins only (never through a token)."""
    if not is_platform_admin(user):
        raise PermissionDenied({"detail": f"only platform admins may {what}"})


def check_manage_tokens(user) -> None:
    """Tokens are created and revoked with a password login (session or basic auth), never with another token."""
    if not _authenticated(user) or token_of(user) is not None:
        raise PermissionDenied({"detail": "API tokens cannot manage API tokens; log in with your password"})
