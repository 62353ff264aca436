from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0026_place_moves'),
    ]

    operations = [
        migrations.AddField(
            model_name='gangjob',
            name='cleanup_rode_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
