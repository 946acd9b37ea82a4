"""Key material for a throw-away control plane: one CA, certificates and the SA signing key.

Everything is generated in memory with ``cryptography`` (EC P-256 keys: fast to generate,
accepted by kube-apiserver for serving, client certificates and service-account tokens) and
written as PEM where a binary needs a file. Nothing here is meant to outlive the control plane.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for any test session or demo, short enough to be obviously throw-away.
_VALIDITY = dt.timedelta(days=7)
# Clock skew between this process and the apiserver is zero (same machine), but a certificate
# dated exactly "now" can be rejected by a verifier that rounds differently.
_BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM-encoded.

    Attributes:
        cert_pem: The X.509 certificate.
        key_pem: The private key (PKCS#8, unencrypted).
    """

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
    )


class CertificateAuthority:
    """A self-signed CA that issues the serving certificate and every client certificate.

    Kube-apiserver trusts it for client certificates (``--client-ca-file``) and clients trust
    it for the serving certificate, so one CA is enough for a test cluster.
    """

    def __init__(self, common_name: str = "devcluster-ca") -> None:
        self._key = _new_key()
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._cert = (
            _builder(self._name, self._name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate, PEM-encoded."""
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(
        self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> KeyPair:
        key = _new_key()
        builder = (
            _builder(subject, self._name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving_cert(self, hosts: list[str]) -> KeyPair:
        """Issue a TLS server certificate.

        Args:
            hosts: DNS names and IP addresses the server answers on; IPs become IP SANs.
        """
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client_cert(self, user: str, groups: list[str]) -> KeyPair:
        """Issue a client certificate that kube-apiserver maps to a user.

        Args:
            user: The user name (certificate CN).
            groups: The user's groups (one O attribute each), e.g. ``["system:masters"]``.
        """
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH, [])


def service_account_keys() -> tuple[bytes, bytes]:
    """The service-account token signing key and its public key, both PEM-encoded.

    The private key goes to ``--service-account-signing-key-file``, the public one to
    ``--service-account-key-file`` (kube-apiserver does not derive it from a PKCS#8 private
    key).
    """
    key = _new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public
