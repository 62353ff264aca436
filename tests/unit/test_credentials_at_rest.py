"""Cluster credentials at rest: Fernet ciphertext in the database, plaintext only in Python, never in the API,
and re-encrypted by `manage.py rotate_encryption_key`."""
import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.management import CommandError, call_command
from django.db import connection

from scheduling.models import Cluster
from scheduling.security import encryption

pytestmark = pytest.mark.django_db

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://127.0.0.1:6443
users:
- name: admin
  user:
    token: sekrit-bearer-token-0123456789
contexts:
- name: prod
  context: {cluster: prod, user: admin}
current-context: prod
"""
KEY_A, KEY_B = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def raw_kubeconfig(name):
    with connection.cursor() as cursor:
        cursor.execute("SELECT kubeconfig FROM scheduling_cluster WHERE name = %s", [name])
        return cursor.fetchone()[0]


def test_uploaded_kubeconfig_is_ciphertext_in_the_row_and_never_returned(api):
    r = api.post("/api/v1/clusters/", {"name": "prod", "kubeconfig": KUBECONFIG}, format="json")
    assert r.status_code == 201, r.data
    stored = raw_kubeconfig("prod")
    assert stored.startswith("fernet:")
    assert "sekrit" not in stored and "apiVersion" not in stored
    assert Cluster.objects.get(name="prod").kubeconfig == KUBECONFIG  # what the backends read
    for url in ["/api/v1/clusters/", "/api/v1/clusters/prod/", "/api/v1/audit/"]:
        assert "sekrit" not in api.get(url).content.decode()
    assert "kubeconfig" not in api.get("/api/v1/clusters/prod/").data
    assert api.get("/api/v1/clusters/prod/").data["has_credentials"] is True


def test_two_saves_of_the_same_kubeconfig_store_different_ciphertexts(db):
    Cluster.objects.create(name="c1", kubeconfig=KUBECONFIG)
    Cluster.objects.create(name="c2", kubeconfig=KUBECONFIG)
    assert raw_kubeconfig("c1") != raw_kubeconfig("c2")


def test_rotation_re_encrypts_every_row_with_the_new_first_key(settings):
    settings.GANGWEB_ENCRYPTION_KEYS = [KEY_A]
    Cluster.objects.create(name="prod", kubeconfig=KUBECONFIG)
    Cluster.objects.create(name="empty", kubeconfig="")
    before = raw_kubeconfig("prod")
    Fernet(KEY_A).decrypt(before.removeprefix("fernet:").encode())

    settings.GANGWEB_ENCRYPTION_KEYS = [KEY_B, KEY_A]
    call_command("rotate_encryption_key", stdout=open("/dev/null", "w"))
    after = raw_kubeconfig("prod")
    assert Fernet(KEY_B).decrypt(after.removeprefix("fernet:").encode()).decode() == KUBECONFIG
    with pytest.raises(InvalidToken):
        Fernet(KEY_A).decrypt(after.removeprefix("fernet:").encode())
    assert raw_kubeconfig("empty") == ""

    settings.GANGWEB_ENCRYPTION_KEYS = [KEY_B]  # the old key can now go
    assert Cluster.objects.get(name="prod").kubeconfig == KUBECONFIG


def test_rotation_encrypts_plaintext_rows_left_from_before(db):
    Cluster.objects.create(name="old")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE scheduling_cluster SET kubeconfig = %s WHERE name = 'old'", [KUBECONFIG])
    assert Cluster.objects.get(name="old").kubeconfig == KUBECONFIG
    call_command("rotate_encryption_key", stdout=open("/dev/null", "w"))
    assert raw_kubeconfig("old").startswith("fernet:")
    assert Cluster.objects.get(name="old").kubeconfig == KUBECONFIG


def test_a_row_no_key_opens_fails_rotation_and_changes_nothing(settings):
    settings.GANGWEB_ENCRYPTION_KEYS = [KEY_A]
    Cluster.objects.create(name="a", kubeconfig=KUBECONFIG)
    settings.GANGWEB_ENCRYPTION_KEYS = [KEY_B]
    Cluster.objects.create(name="b", kubeconfig=KUBECONFIG)
    before = {n: raw_kubeconfig(n) for n in ("a", "b")}
    with pytest.raises(CommandError, match="cannot be decrypted"):
        call_command("rotate_encryption_key", stdout=open("/dev/null", "w"))
    assert {n: raw_kubeconfig(n) for n in ("a", "b")} == before
    with pytest.raises(encryption.DecryptionError):
        Cluster.objects.get(name="a")


def test_development_key_is_derived_from_the_secret_key_only_in_debug_or_tests(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.GANGWEB_ENCRYPTION_KEYS = []
    assert encryption.configured_keys() == [encryption.derived_dev_key(settings.SECRET_KEY)]
    settings.DEBUG, settings.TESTING = False, False
    with pytest.raises(ImproperlyConfigured):
        encryption.configured_keys()
