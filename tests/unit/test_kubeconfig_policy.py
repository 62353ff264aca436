"""The kubeconfig rules (scheduling/kube/kubeconfig_policy.py): data only, never code or file paths."""
import base64

import pytest
import yaml

from scheduling.kube.kubeconfig_policy import MAX_DEPTH, KubeconfigRefused, validate
from tests.fake_apiserver import self_signed

CERT, KEY = self_signed()
B64 = base64.b64encode


def doc(cluster=None, user=None, **top):
    return {"apiVersion": "v1", "kind": "Config", "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443", **(cluster or {})}}],
            "users": [{"name": "u", "user": {"token": "t"} if user is None else user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], **top}


def refused(document) -> tuple[str, str]:
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    with pytest.raises(KubeconfigRefused) as failure:
        validate(text)
    return failure.value.field, failure.value.message


U = "kubeconfig.users[0].user"
C = "kubeconfig.clusters[0].cluster"


@pytest.mark.parametrize("document, field", [
    (doc(user={"exec": {"command": "/bin/sh"}}), f"{U}.exec"),
    (doc(user={"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/id"}}}), f"{U}.auth-provider"),
    (doc(user={"auth-provider": {"name": "oidc", "config": {"idp-issuer-url": "https://10.0.0.1"}}}),
     f"{U}.auth-provider"),
    (doc(user={"tokenFile": "/proc/self/environ"}), f"{U}.tokenFile"),
    (doc(user={"client-certificate": "/etc/passwd"}), f"{U}.client-certificate"),
    (doc(user={"client-key": "/etc/shadow"}), f"{U}.client-key"),
    (doc(user={"username": "u"}), f"{U}.username"),
    (doc(user={"token": "t", "password": "p"}), f"{U}.password"),
    (doc(user={"as": "system:admin"}), f"{U}.as"),
    (doc(user={"surprise": 1}), f"{U}.surprise"),
    (doc(cluster={"certificate-authority": "/etc/ssl/ca.pem"}), f"{C}.certificate-authority"),
    (doc(cluster={"proxy-url": "http://10.0.0.1:3128"}), f"{C}.proxy-url"),
    (doc(cluster={"insecure-skip-tls-verify": True}), f"{C}.insecure-skip-tls-verify"),
    (doc(cluster={"server": "http://k8s.example"}), f"{C}.server"),
    (doc(cluster={"server": "https://user:pw@k8s.example"}), f"{C}.server"),
    (doc(cluster={"server": "https://k8s.example:99999"}), f"{C}.server"),
    (doc(cluster={"certificate-authority-data": "not base64!"}), f"{C}.certificate-authority-data"),
    (doc(cluster={"certificate-authority-data": B64(b"not a pem").decode()}), f"{C}.certificate-authority-data"),
    (doc(user={"client-certificate-data": B64(CERT).decode()}), f"{U}.client-key-data"),
    (doc(user={"client-certificate-data": B64(CERT).decode(), "client-key-data": B64(CERT).decode()}),
     f"{U}.client-key-data"),
    (doc(user={"token": "a b"}), f"{U}.token"),
    (doc(user={"token": "  "}), f"{U}.token"),
    (doc(preferences=None, extra=1), "kubeconfig.extra"),
    ({**doc(), "current-context": "nope"}, "kubeconfig.current-context"),
    ({**doc(), "contexts": [{"name": "x", "context": {"cluster": "gone"}}]}, "kubeconfig.contexts[0].context.cluster"),
])
def test_what_is_refused_names_its_field(document, field):
    assert refused(document)[0] == field


def test_an_unused_user_entry_is_checked_too():
    document = doc()
    document["users"].append({"name": "spare", "user": {"exec": {"command": "id"}}})
    assert refused(document)[0] == "kubeconfig.users[1].user.exec"


def test_yaml_aliases_depth_and_size_are_capped():
    assert "anchors or aliases" in refused("a: &x [1]\nb: *x\n")[1]
    assert f"more than {MAX_DEPTH} levels" in refused("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))[1]
    assert "larger than" in refused("a: " + "x" * 300_000)[1]
    assert refused("- just a list")[0] == "kubeconfig"


def test_data_fields_and_a_stripped_token_make_the_connection():
    text = yaml.safe_dump(doc(cluster={"certificate-authority-data": B64(CERT).decode(), "tls-server-name": "api"},
                              user={"token": "tok-1\n", "client-certificate-data": B64(CERT).decode(),
                                    "client-key-data": B64(KEY).decode()}))
    conn = validate(text)
    assert (conn.host, conn.port, conn.path, conn.tls_server_name) == ("k8s.example", 6443, "", "api")
    assert conn.token == "tok-1" and conn.ca_pem == CERT and conn.client_key_pem == KEY
    assert "tok-1" not in repr(conn)


def test_the_chosen_context_is_used_and_a_missing_one_is_named_as_the_context_field():
    document = doc()
    document["clusters"].append({"name": "d", "cluster": {"server": "https://[2001:db8::1]/prefix/"}})
    document["contexts"].append({"name": "y", "context": {"cluster": "d"}})
    conn = validate(yaml.safe_dump(document), "y")
    assert (conn.host, conn.port, conn.path, conn.token) == ("2001:db8::1", 443, "/prefix", None)
    with pytest.raises(KubeconfigRefused) as failure:
        validate(yaml.safe_dump(document), "z")
    assert failure.value.field == "context"
