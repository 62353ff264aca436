"""A stored credential read again within minutes is not decrypted again (security/encryption.decrypt_cached)."""
from __future__ import annotations

import pytest
from cryptography.fernet import Fernet, MultiFernet

from scheduling.security import encryption


@pytest.fixture
def decryptions(monkeypatch):
    """The number of Fernet decryptions so far (a list of one count), from an empty cache."""
    encryption.forget_decrypted()
    count = [0]
    real = MultiFernet.decrypt

    def counting(self, token, *args, **kwargs):
        count[0] += 1
        return real(self, token, *args, **kwargs)

    monkeypatch.setattr(MultiFernet, "decrypt", counting)
    yield count
    encryption.forget_decrypted()


def test_the_same_stored_value_is_decrypted_once_until_its_lifetime_ends(decryptions, monkeypatch):
    stored = encryption.encrypt("apiVersion: v1\nkind: Config\n")
    assert [encryption.decrypt_cached(stored) for _ in range(5)] == ["apiVersion: v1\nkind: Config\n"] * 5
    assert decryptions[0] == 1
    now = encryption.time.monotonic()
    monkeypatch.setattr(encryption.time, "monotonic", lambda: now + encryption.DECRYPTED_SECONDS + 1)
    assert encryption.decrypt_cached(stored) == "apiVersion: v1\nkind: Config\n"
    assert decryptions[0] == 2


def test_a_new_save_of_the_credential_is_a_new_value_decrypted_anew(decryptions):
    old, new = encryption.encrypt("token: a"), encryption.encrypt("token: b")
    assert (encryption.decrypt_cached(old), encryption.decrypt_cached(new)) == ("token: a", "token: b")
    assert decryptions[0] == 2


def test_a_key_taken_out_of_the_configuration_opens_nothing_even_when_remembered(decryptions, settings):
    settings.GANGWEB_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    stored = encryption.encrypt("token: a")
    assert encryption.decrypt_cached(stored) == "token: a"
    settings.GANGWEB_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(encryption.DecryptionError):
        encryption.decrypt_cached(stored)


def test_plaintext_and_empty_values_pass_through_without_decrypting(decryptions):
    assert (encryption.decrypt_cached(""), encryption.decrypt_cached("legacy plaintext")) == ("", "legacy plaintext")
    assert decryptions[0] == 0


@pytest.mark.django_db
def test_reading_a_cluster_row_again_does_not_decrypt_its_kubeconfig_again(decryptions):
    from scheduling.models import Cluster

    cluster = Cluster.objects.create(name="c1", kubeconfig="apiVersion: v1\nkind: Config\n")
    encryption.forget_decrypted()
    decryptions[0] = 0
    assert {Cluster.objects.get(pk=cluster.pk).kubeconfig for _ in range(4)} == {"apiVersion: v1\nkind: Config\n"}
    assert decryptions[0] == 1
