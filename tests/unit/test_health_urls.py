"""/healthz and /readyz (gangweb/health.py): answered for a kubelet probe (pod IP as Host, plain HTTP, no login),
and /readyz says 503 while the database does not answer, 200 again once it does."""
import socket

import pytest
from django.db import connection
from django.test import Client, override_settings

POD_IP_HOST = "10.244.3.17:8000"  # what the kubelet sends as Host; never in ALLOWED_HOSTS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("path,body", [("/healthz", b"ok\n"), ("/readyz", b"ready\n"), ("/readyz/", b"ready\n")])
@override_settings(SECURE_SSL_REDIRECT=True, ALLOWED_HOSTS=["gangweb.example.com"])
def test_a_kubelet_probe_is_answered_without_host_https_or_login(db, path, body):
    response = Client(HTTP_HOST=POD_IP_HOST).get(path)
    assert (response.status_code, response.content) == (200, body)
    assert response["Cache-Control"] == "no-store"


def test_any_other_page_still_checks_the_host(db):
    assert Client(HTTP_HOST=POD_IP_HOST).get("/accounts/login/").status_code == 400


def test_readyz_is_503_while_the_database_is_down_and_200_once_it_is_back(transactional_db):
    settings = connection.settings_dict
    saved = dict(settings)
    client = Client()
    assert client.get("/readyz").status_code == 200
    connection.close()
    if connection.vendor == "sqlite":
        settings["NAME"] = "/nonexistent-gangweb-dir/db.sqlite3"
    else:
        settings.update(HOST="127.0.0.1", PORT=str(free_port()))  # nothing listens there: connection refused
    try:
        down = client.get("/readyz")
        assert (down.status_code, down.content) == (503, b"database unavailable\n")
        assert client.get("/healthz").status_code == 200  # liveness never depends on the database
    finally:
        connection.close()
        settings.clear()
        settings.update(saved)
    assert client.get("/readyz").status_code == 200
