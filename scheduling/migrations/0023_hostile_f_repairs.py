"""The latest repair of a job's drifted gang objects and its backoff (hostile pass F5; reconcile/jobs/repairs.py).
A JSON column with a constant default: adding it rewrites no rows on PostgreSQL 11+."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0022_scheduler_presence")]

    operations = [
        migrations.AddField(
            model_name="gangjob", name="repairs",
            field=models.JSONField(blank=True, default=dict,
                                   help_text="latest repair of drifted gang objects and its backoff")),
    ]
