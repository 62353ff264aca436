"""Model fields shared by several models."""
from django.db import models

from .. import encryption


class EncryptedTextField(models.TextField):
    """Text that is plaintext in Python and Fernet ciphertext in the database (see scheduling/encryption.py).

    Reading a row decrypts (raises encryption.DecryptionError when no configured key fits); saving encrypts with the
    current key. Ciphertext is randomised, so the column cannot be filtered on except for emptiness.
    """

    def from_db_value(self, value, expression, connection):
        if value is None:
            return value
        return encryption.decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None:
            return value
        return encryption.encrypt(value)
