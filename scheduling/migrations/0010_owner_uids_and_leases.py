from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0009_webhooks'),
    ]

    operations = [
        # Existing rows get NULL (no Job UID recorded: trusted by namespace and label only, see GangJob.owner_uids);
        # new rows get {} from the model's default.
        migrations.AddField(
            model_name='gangjob',
            name='owner_uids',
            field=models.JSONField(blank=True, null=True, help_text='UIDs of the Indexed Jobs gangweb created for the job, by name'),
        ),
        migrations.AlterField(
            model_name='gangjob',
            name='owner_uids',
            field=models.JSONField(blank=True, default=dict, null=True, help_text='UIDs of the Indexed Jobs gangweb created for the job, by name'),
        ),
        migrations.CreateModel(
            name='Lease',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('holder', models.CharField(blank=True, max_length=64)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('cursor', models.BigIntegerField(default=0)),
            ],
        ),
    ]
