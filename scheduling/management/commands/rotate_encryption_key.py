"""Re-encrypt every stored credential with the current (first) key of GANGWEB_ENCRYPTION_KEYS."""
from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import models, transaction
from django.db.models.functions import Cast

from scheduling.models.fields import EncryptedTextField
from scheduling.security import encryption


def encrypted_fields():
    """(model, [field names]) for every model with an EncryptedTextField."""
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if names:
            yield model, names


class Command(BaseCommand):
    """`manage.py rotate_encryption_key`.

    Rotation: put the new key first in GANGWEB_ENCRYPTION_KEYS (keep the old ones after it), restart, run this
    command, then drop the old keys. Rows that no configured key opens are reported and the command fails
    without changing anything. Plaintext rows left from before encryption are encrypted too.
    """

    help = "Re-encrypt every stored credential with the first key in GANGWEB_ENCRYPTION_KEYS."

    def handle(self, *args, **options):
        total = 0
        with transaction.atomic():
            for model, names in encrypted_fields():
                # Read the stored text as is (a plain TextField cast skips the field's decryption), so that a row
                # no key opens is named instead of failing the whole query.
                raw = {f"raw_{n}": Cast(n, output_field=models.TextField()) for n in names}
                rows = model.objects.annotate(**raw).values_list("pk", *raw)
                count = 0
                for pk, *stored in rows.iterator():
                    try:
                        plain = {n: encryption.decrypt(value or "") for n, value in zip(names, stored, strict=True)}
                    except encryption.DecryptionError as exc:
                        raise CommandError(f"{model._meta.label} {pk}: {exc}; nothing was changed") from None
                    model.objects.filter(pk=pk).update(**plain)  # the field encrypts with the current key
                    count += 1
                total += count
                self.stdout.write(f"{model._meta.label}: re-encrypted {count} row(s) ({', '.join(names)})")
        self.stdout.write(self.style.SUCCESS(f"rotate_encryption_key: {total} row(s) now use the current key"))
