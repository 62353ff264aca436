"""Model fields shared by several models."""
from django.db import models

from ..security import encryption


class EncryptedTextField(models.TextField):
    """Text that is plaintext in Python and Fernet ciphertext in the database (see scheduling/security/encryption.py).

    Reading a row decrypts (raises encryption.DecryptionError when no configured key fits; a value read again within
    a few minutes is not decrypted again: `encryption.decrypt_cached`); saving encrypts with the
    current key. Ciphertext is randomised, so the column cannot be filtered on except for emptiness.
    """

    def from_db_value(self, value, expression, connection):
        if value is None:
            return value
        return encryption.decrypt_cached(value)  # remembered per stored value for a few minutes: see there

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None:
            return value
        return encryption.encrypt(value)


class DbClockDateTimeField(models.DateTimeField):
    """A DateTimeField whose `auto_now` / `auto_now_add` take the database's clock (scheduling/db/clock.py), not this
    host's: a worker whose clock runs ahead never writes a row's `updated_at` in the future, and a time compared
    with the database's `now()` (the resync's) means what it says. Migrations see a plain DateTimeField: the column
    is the same."""

    def pre_save(self, model_instance, add):
        if self.auto_now or (self.auto_now_add and add):
            from ..db import clock as dbclock

            value = dbclock.now(model_instance._state.db or "default")
            setattr(model_instance, self.attname, value)
            return value
        return super().pre_save(model_instance, add)

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.DateTimeField", args, kwargs
