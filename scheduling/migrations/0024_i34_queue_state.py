"""One queue state model for both queue families (issue 34): VolcanoQueueState's rows become QueueClusterState rows
of family "volcano" (the KAI rows get family "kai"), with their warnings; every row is kept, and the reverse puts
them back. A row is unique per (policy, cluster, family): a cluster that serves both keeps one row each."""
from django.db import migrations, models

FIELDS = ("policy_id", "cluster_id", "state", "message", "warnings", "last_synced_at", "resource_version",
          "last_drift", "last_drift_at", "status", "status_at")


def volcano_rows_in(apps, schema_editor):
    """Copy every VolcanoQueueState row into QueueClusterState, family volcano."""
    Volcano = apps.get_model("scheduling", "VolcanoQueueState")
    State = apps.get_model("scheduling", "QueueClusterState")
    rows = Volcano.objects.order_by("pk").values(*FIELDS)
    State.objects.bulk_create([State(family="volcano", **row) for row in rows.iterator(chunk_size=1000)],
                              batch_size=1000)


def volcano_rows_out(apps, schema_editor):
    """The reverse: the family-volcano rows back into VolcanoQueueState, then removed from QueueClusterState."""
    Volcano = apps.get_model("scheduling", "VolcanoQueueState")
    State = apps.get_model("scheduling", "QueueClusterState")
    rows = State.objects.filter(family="volcano").order_by("pk").values(*FIELDS)
    Volcano.objects.bulk_create([Volcano(**row) for row in rows.iterator(chunk_size=1000)], batch_size=1000)
    State.objects.filter(family="volcano").delete()


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0023_hostile_f_repairs")]

    operations = [
        migrations.AddField(
            model_name="queueclusterstate", name="family",
            field=models.CharField(choices=[("kai", "KAI"), ("volcano", "Volcano")], default="kai", max_length=16)),
        migrations.AddField(
            model_name="queueclusterstate", name="warnings", field=models.JSONField(blank=True, default=list)),
        migrations.AlterField(
            model_name="queueclusterstate", name="resource_version",
            field=models.CharField(blank=True, help_text="of the queue object as last seen", max_length=64)),
        migrations.RemoveConstraint(model_name="queueclusterstate", name="uniq_queue_state_per_cluster"),
        migrations.AddConstraint(
            model_name="queueclusterstate",
            constraint=models.UniqueConstraint(fields=("policy", "cluster", "family"),
                                               name="uniq_queue_state_per_family")),
        migrations.AlterModelOptions(name="queueclusterstate", options={"ordering": ["policy_id", "cluster_id",
                                                                                     "family"]}),
        migrations.RunPython(volcano_rows_in, volcano_rows_out),
        migrations.DeleteModel(name="VolcanoQueueState"),
    ]
