"""When each backend's scheduler was last seen acting on a cluster (issue 33 item 3; reconcile/probe.py,
kube/scheduler_presence.py). A JSON column with a constant default: adding it rewrites no rows on PostgreSQL 11+."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0021_task_queued_at")]

    operations = [
        migrations.AddField(
            model_name="cluster", name="scheduler_presence",
            field=models.JSONField(blank=True, default=dict,
                                   help_text="{backend family: when its scheduler was last seen}, as probed")),
    ]
