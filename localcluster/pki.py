"""Certificates and keys for a local control plane, made with the `cryptography` library.

What is generated (all PEM, in one directory):

- ``ca.crt``/``ca.key``: a self-signed CA. It signs the serving and client certificates, and kube-apiserver trusts
  client certificates signed by it (``--client-ca-file``).
- ``apiserver.crt``/``apiserver.key``: kube-apiserver's serving certificate, valid for 127.0.0.1, localhost and the
  in-cluster ``kubernetes.default.svc`` names.
- ``admin.crt``/``admin.key``: the admin client certificate. Organisation ``system:masters`` makes it a superuser
  under RBAC, as in controller-runtime envtest and kubeadm.
- ``sa.key``/``sa.pub``: the service-account token signing key pair (RSA, as kube-apiserver and
  kube-controller-manager both accept it).
- ``front-proxy-ca.crt``/``front-proxy-ca.key`` and ``front-proxy-client.crt``/``.key``: the aggregation layer's
  own CA (``--requestheader-client-ca-file``, kept apart from the cluster CA as kubeadm does, so a client certificate
  of the cluster CA can never assert another user through the X-Remote-User header) and the client certificate
  kube-apiserver presents to extension API servers (``--proxy-client-cert-file``, CN ``front-proxy-client``).

`issue_serving_cert` signs further serving certificates with the cluster CA (the Kueue manager's webhook server).

Keys for certificates are ECDSA P-256: generated in milliseconds, accepted by every component.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_VALIDITY = dt.timedelta(days=365)
# Backdate certificates a little so a clock step between generation and use does not make them "not yet valid".
CLOCK_SKEW = dt.timedelta(hours=1)

ADMIN_USER = "gangweb-admin"
ADMIN_GROUP = "system:masters"
# kube-apiserver's --requestheader-allowed-names: the CN of the front-proxy client certificate (kubeadm's name).
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class PKIPaths:
    """Paths of the files `generate_pki` writes."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.dir / "front-proxy-ca.crt"

    @property
    def front_proxy_ca_key(self) -> Path:
        return self.dir / "front-proxy-ca.key"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.dir / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.dir / "front-proxy-client.key"


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _write_key(path: Path, key) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _issue(subject, public_key, issuer, issuer_key, *, ca=False, server=False, client=False, sans=()):
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def generate_pki(directory: Path, service_ip: str = "10.96.0.1") -> PKIPaths:
    """Write a fresh CA, apiserver serving cert, admin client cert and SA key pair into ``directory``.

    ``service_ip`` is the first address of the service CIDR (the in-cluster ``kubernetes`` Service), added to the
    serving certificate's SANs. Returns the paths. Existing files are overwritten.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = PKIPaths(directory)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("gangweb-localcluster-ca")
    ca_cert = _issue(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    _write_key(paths.ca_key, ca_key)
    _write_cert(paths.ca_cert, ca_cert)

    server_key = ec.generate_private_key(ec.SECP256R1())
    sans = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(service_ip)),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
    ]
    server_cert = _issue(
        _name("kube-apiserver"), server_key.public_key(), ca_name, ca_key, server=True, sans=sans
    )
    _write_key(paths.apiserver_key, server_key)
    _write_cert(paths.apiserver_cert, server_cert)

    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_cert = _issue(_name(ADMIN_USER, ADMIN_GROUP), admin_key.public_key(), ca_name, ca_key, client=True)
    _write_key(paths.admin_key, admin_key)
    _write_cert(paths.admin_cert, admin_cert)

    fp_key = ec.generate_private_key(ec.SECP256R1())
    fp_name = _name("gangweb-localcluster-front-proxy-ca")
    fp_cert = _issue(fp_name, fp_key.public_key(), fp_name, fp_key, ca=True)
    _write_key(paths.front_proxy_ca_key, fp_key)
    _write_cert(paths.front_proxy_ca_cert, fp_cert)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _issue(_name(FRONT_PROXY_CLIENT), client_key.public_key(), fp_name, fp_key, client=True)
    _write_key(paths.front_proxy_client_key, client_key)
    _write_cert(paths.front_proxy_client_cert, client_cert)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(paths.sa_key, sa_key)
    paths.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return paths


LOCAL_SANS = (x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"))


def issue_serving_cert(paths: PKIPaths, cert_path: Path, key_path: Path, common_name: str) -> None:
    """Write a serving certificate for 127.0.0.1 and localhost, signed by the cluster CA of ``paths``, to
    ``cert_path``/``key_path`` (directories made; existing files overwritten). Clients that trust ``ca.crt`` (the
    API server calling a webhook with that CA as ``caBundle``) then verify it."""
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(_name(common_name), key.public_key(), ca_cert.subject, ca_key, server=True, sans=LOCAL_SANS)
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.parent.mkdir(parents=True, exist_ok=True)
    _write_key(key_path, key)
    _write_cert(cert_path, cert)


def self_signed_serving_pem(common_name: str) -> tuple[bytes, bytes]:
    """Return ``(cert_pem, key_pem)`` of a self-signed serving certificate for 127.0.0.1 and localhost, valid for
    `CERT_VALIDITY`: for servers nobody verifies (an APIService with ``insecureSkipTLSVerify``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = _issue(name, key.public_key(), name, key, server=True, sans=LOCAL_SANS)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def serving_pair_valid(cert_path: Path, key_path: Path, min_left: dt.timedelta = dt.timedelta(days=7)) -> bool:
    """True if ``cert_path`` holds a certificate valid for at least ``min_left`` more whose public key matches the
    private key in ``key_path`` (False for missing, unreadable or mismatched files)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return False
    spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    same_key = cert.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)
    return same_key and cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > min_left
