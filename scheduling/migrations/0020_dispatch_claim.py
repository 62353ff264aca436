"""A claim on a never-dispatched job taken into a single submit's batch (issue 23 part 4,
scheduling/reconcile/jobs/coalesce.py): who holds it (a task id) and until when. Both nullable/defaulted, so adding
them rewrites no rows on PostgreSQL 11+."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0019_history_indexes")]

    operations = [
        migrations.AddField(model_name="gangjob", name="claimed_by",
                            field=models.CharField(blank=True, default="", max_length=64)),
        migrations.AddField(model_name="gangjob", name="claimed_until",
                            field=models.DateTimeField(blank=True, null=True)),
    ]
