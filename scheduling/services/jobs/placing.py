"""A submit that names no cluster, or several: gangweb chooses (the rule: `placement.rule`; docs/queues.md, "Where a
job runs"). The candidates are the clusters the queue takes jobs on, among those the body names when it names a
list, that the user may see and whose last probe found a plugin of the template's backend family.

`cluster` in a submit body: absent or null (every cluster of the queue), a list of 1 to MAX_CHOICES distinct names
(those), or a string (that cluster, exactly as before: no placement).
"""
from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.utils import timezone

from ...models import Cluster, QueuePolicy
from ...models.jobs import requested_totals
from ...placement import numbers as placement_numbers
from ...placement import rule
from .. import validation as v
from ..access import roles as access
from ..errors import NotKnownNow

MAX_CHOICES = 50


def choices(value, field: str = "cluster") -> list[str] | None:
    """The candidate names a body's `cluster` gives: None for absent/null (every cluster of the queue), else the
    list's names. Raises ValidationError naming the field for an empty list, a repeated name, a name that is not
    a string of 1..63 characters, or more than MAX_CHOICES names."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValidationError({field: "must be a cluster name, a non-empty list of cluster names, or left out "
                                      "(gangweb chooses)"})
    if len(value) > MAX_CHOICES:
        raise ValidationError({field: f"at most {MAX_CHOICES} clusters to choose from, got {len(value)}"})
    names = [v.string(name, f"{field}[{i}]", max_length=63) for i, name in enumerate(value)]
    if len(set(names)) != len(names):
        raise ValidationError({field: "names a cluster twice"})
    return names


def _pool(user, queue: QueuePolicy, family: str, wanted: list[str] | None, lookups) -> list[Cluster]:
    """The clusters the job may go to (sorted by name). Raises ValidationError({"cluster"}) naming why when there
    is none, or when a listed name is not a cluster the user can see (as a named cluster would)."""
    clusters = sorted(lookups.clusters.values(), key=lambda c: c.name)
    if wanted is not None:
        by_name = {c.name: c for c in clusters}
        for name in wanted:  # an unknown or hidden name answers as a single named cluster does
            access.named_cluster(user, by_name.get(name), name)
        clusters = [by_name[name] for name in sorted(wanted)]
    pool, refused = [], []
    for c in clusters:
        try:  # first: a cluster the user may not see is never named, not even in why another was refused
            access.named_cluster(user, c, c.name)
        except ValidationError:
            continue  # not the user's to know of
        if not lookups.takes(queue, c):
            refused.append(f"queue '{queue.name}' does not take jobs on {c.name}")
            continue
        if placement_numbers.serves(c, family) is False:
            refused.append(f"{c.name} does not run backend '{family}'")
            continue
        pool.append(c)
    if not pool:
        why = "; ".join(refused) or "the queue takes jobs on no cluster you can see"
        raise ValidationError({"cluster": f"no cluster to place the job on: {why}"})
    return pool


def place(user, queue: QueuePolicy, version, overrides, wanted: list[str] | None, lookups
          ) -> tuple[Cluster, rule.Decision]:
    """Choose the job's cluster among the candidates (module docstring) by `placement.rule.choose`, and count the
    job there for the next placement of the same request (`rule.take`: a bulk spreads). Returns (cluster,
    decision). Raises ValidationError({"cluster"}) when no cluster can take it (none is a candidate, or it asks
    more than any has in all) and NotKnownNow (503) when no candidate's numbers are known now (unreachable,
    stale); what `lookups.render` raises for bad overrides."""
    family = version.backend
    pool = _pool(user, queue, family, wanted, lookups)
    resolved = lookups.render(version, overrides)
    demand = rule.Amounts(*_totals(resolved))
    numbers = lookups.placement_numbers()
    candidates = [rule.Candidate(numbers.wheres[c.id], numbers.there(queue.id, c.id)) for c in pool]
    try:
        decision = rule.choose(demand, candidates, placement_numbers.pod_asks(resolved))
    except rule.Unplaceable as exc:
        if exc.code == rule.NONE_KNOWN:
            raise NotKnownNow({"cluster": f"gangweb cannot place the job now: {exc.message}. Retry later, or name "
                                          "a cluster"}) from None
        raise ValidationError({"cluster": f"no cluster to place the job on: {exc.message}"}) from None
    chosen = next(c for c in candidates if c.where.id == decision.cluster_id)
    rule.take(chosen, demand)
    return numbers.clusters[decision.cluster_id], decision


def _totals(resolved: dict) -> tuple:
    gpu, cpu, memory = requested_totals(resolved)
    return Decimal(str(gpu)), cpu, memory


def count_named(lookups, queue: QueuePolicy, cluster: Cluster, resolved: dict) -> None:
    """A job of the same request placed by name: counted where it goes, so the request's placed jobs see it, those
    before it in the request and those after (call it only when the request places any, `lookups.placing`: the
    numbers are loaded here if no job was placed yet, once per request)."""
    numbers = lookups.placement_numbers()
    if cluster.id not in numbers.wheres:
        return
    demand = rule.Amounts(*_totals(resolved))
    rule.take(rule.Candidate(numbers.wheres[cluster.id], numbers.there(queue.id, cluster.id)), demand)


def load_numbers(clusters: list[Cluster]) -> placement_numbers.Numbers:
    """The placement numbers of `clusters` now (one statement)."""
    return placement_numbers.Numbers(clusters, timezone.now())
