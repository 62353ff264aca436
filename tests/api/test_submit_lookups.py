"""Submit lookups (services/jobs/lookups.py) load, in two statements, the same rows the ORM would: every field of a
queue and its parents converted alike (JSON, booleans, dates), the named clusters, the queues' cluster links and the
template versions with their cached specs."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.models import QueuePolicy, RuntimeTemplateVersion
from scheduling.services.jobs.lookups import Lookups
from scheduling.services.templates import versions as template_versions
from tests import builders

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_a_queue_and_its_parents_come_back_as_the_orm_loads_them():
    cluster, other = builders.make_cluster("a"), builders.make_cluster("b")
    top = builders.make_queue("top", cpu_limit=64000, allowed_namespaces=["ml"], managed=False)
    chain = [top]
    for i in range(4):
        chain.append(builders.make_queue(f"level-{i}", parent=chain[-1], clusters=[cluster] if i == 3 else [],
                                         gpu_quota=0.5 * i, allowed_namespaces=["ml", f"ns-{i}"]))
    leaf = chain[-1]
    with CaptureQueriesContext(connection) as queries:
        lk = Lookups.load([{"queue": "level-3", "cluster": "a"}, {"queue": "level-1", "cluster": "b"},
                           {"queue": "nope", "cluster": "missing"}])
    # queues (3 parents with each: level-3's 4th level up, top, came with level-1). What is allocated against top's
    # finite cpu_limit is read later, per backend, when a job is checked (services/queues/allocation.py). No template
    # named: no versions statement.
    assert len(queries) == 1
    assert set(lk.queues) == {"level-3", "level-1"}
    assert _fields(lk.queues["level-3"]) == _fields(QueuePolicy.objects.get(pk=leaf.pk))
    assert _fields(lk.queues["level-3"].parent.parent) == _fields(QueuePolicy.objects.get(name="level-1"))
    assert [q.name for q in lk.tree.ancestors(lk.tree.by_id[leaf.id])] == ["level-2", "level-1", "level-0", "top"]
    assert {name: c.id for name, c in lk.clusters.items()} == {"a": cluster.id, "b": other.id}
    assert lk.parents == {chain[2].id}  # level-1 has a child; level-3 is a leaf
    assert lk.takes(lk.queues["level-3"], lk.clusters["a"]) and not lk.takes(lk.queues["level-3"], lk.clusters["b"])
    assert lk.takes(lk.queues["level-1"], lk.clusters["b"])  # names no cluster: takes every one


def test_template_versions_come_with_their_template_and_the_stored_spec():
    v1 = builders.make_template("llm")
    v2 = template_versions.add_version(None, v1.template, builders.template_spec(pod_sets=[builders.pod_set(
        replicas=5)]))
    lk = Lookups.load([{"template": "llm"}, {"template": "llm", "template_version": 1}])
    assert lk.latest["llm"].id == v2.id and lk.latest["llm"].template.name == "llm"
    for ver in (lk.latest["llm"], lk.versions[("llm", 1)]):
        assert ver.spec == RuntimeTemplateVersion.objects.get(pk=ver.pk).spec
        assert ver.created_at == RuntimeTemplateVersion.objects.get(pk=ver.pk).created_at
    assert lk.latest["llm"].spec["podSets"][0]["replicas"] == 5
