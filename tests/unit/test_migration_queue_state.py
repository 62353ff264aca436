"""Migration 0024_i34_queue_state keeps every queue state row: the Volcano rows become family "volcano" rows of the
one state model, with their warnings and status, and migrating back puts them where they were."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("scheduling", "0023_hostile_f_repairs")]
AFTER = [("scheduling", "0024_i34_queue_state")]


def migrate(to):
    """Migrate the test database to `to` and return the historical apps there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(to)
    return executor.loader.project_state(to).apps


def executor_leaf():
    """The latest migration of every app (the state the rest of the suite expects)."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_every_state_row_survives_the_merge_and_its_reverse():
    apps = migrate(BEFORE)
    Cluster = apps.get_model("scheduling", "Cluster")
    Policy = apps.get_model("scheduling", "QueuePolicy")
    Kai = apps.get_model("scheduling", "QueueClusterState")
    Volcano = apps.get_model("scheduling", "VolcanoQueueState")
    cluster = Cluster.objects.create(name="east")
    team = Policy.objects.create(name="team-a")
    other = Policy.objects.create(name="team-b")
    Kai.objects.create(policy=team, cluster=cluster, state="InSync", status={"allocated": {"gpu": 2.0}})
    Volcano.objects.create(policy=team, cluster=cluster, state="Error", message="webhook said no",
                           warnings=[{"code": "NoLimit", "field": "gpu_limit", "message": "ignored"}],
                           status={"state": "Open", "running": 2})
    Volcano.objects.create(policy=other, cluster=cluster, state="Pending")

    apps = migrate(AFTER)
    State = apps.get_model("scheduling", "QueueClusterState")
    rows = {(r.policy.name, r.family): r for r in State.objects.select_related("policy")}
    assert set(rows) == {("team-a", "kai"), ("team-a", "volcano"), ("team-b", "volcano")}
    assert rows["team-a", "kai"].status == {"allocated": {"gpu": 2.0}} and rows["team-a", "kai"].warnings == []
    moved = rows["team-a", "volcano"]
    assert (moved.state, moved.message, moved.status) == ("Error", "webhook said no", {"state": "Open", "running": 2})
    assert moved.warnings == [{"code": "NoLimit", "field": "gpu_limit", "message": "ignored"}]

    apps = migrate(BEFORE)
    Kai = apps.get_model("scheduling", "QueueClusterState")
    Volcano = apps.get_model("scheduling", "VolcanoQueueState")
    assert list(Kai.objects.values_list("policy__name", "state")) == [("team-a", "InSync")]
    assert sorted(Volcano.objects.values_list("policy__name", "state", "message")) == [
        ("team-a", "Error", "webhook said no"), ("team-b", "Pending", "")]
    migrate(executor_leaf())
