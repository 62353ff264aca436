"""When a job's reconcile task was queued (issue 31 part 1): the resync's grace reads it instead of `updated_at`.
Nullable, so adding it rewrites no rows on PostgreSQL 11+."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0020_dispatch_claim")]

    operations = [
        migrations.AddField(model_name="gangjob", name="task_queued_at",
                            field=models.DateTimeField(blank=True, null=True)),
    ]
