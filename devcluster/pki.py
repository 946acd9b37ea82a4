"""Key material for throw-away test infrastructure: CAs, certificates and the SA signing key.

Everything is generated in memory with ``cryptography`` and written as PEM where a binary needs
a file. The defaults suit the control plane: EC P-256 keys (fast to generate, accepted by
kube-apiserver for serving, client certificates and service-account tokens) in PKCS#8, valid
for a week. The Training Operator's webhook material asks for RSA keys in PKCS#1 and a longer
validity, which ``CertificateAuthority`` takes as parameters. Nothing here is meant to outlive
the process that made it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyAlgorithm = Literal["ec-p256", "rsa-2048"]
# "pkcs1" is the traditional RSA encoding ("BEGIN RSA PRIVATE KEY"); it exists for RSA only.
KeyEncoding = Literal["pkcs8", "pkcs1"]
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

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
        key_pem: The private key, unencrypted, in the issuing CA's key encoding (PKCS#8 by
            default).
    """

    cert_pem: bytes
    key_pem: bytes


def _new_key(algorithm: KeyAlgorithm = "ec-p256") -> PrivateKey:
    if algorithm == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: PrivateKey, encoding: KeyEncoding = "pkcs8") -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        # TraditionalOpenSSL is PKCS#1 for an RSA key ("BEGIN RSA PRIVATE KEY").
        serialization.PrivateFormat.TraditionalOpenSSL
        if encoding == "pkcs1"
        else serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    # IP addresses become IP SANs, everything else a DNS name.
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    return sans


def _key_usage(key: PrivateKey, *, ca: bool) -> x509.KeyUsage:
    # An RSA key can also encipher (TLS RSA key exchange); an EC key only signs.
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=isinstance(key, rsa.RSAPrivateKey),
        key_cert_sign=ca,
        crl_sign=ca,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: PrivateKey, validity: dt.timedelta
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
    )


class CertificateAuthority:
    """A self-signed CA that issues the serving certificate and every client certificate.

    Kube-apiserver trusts it for client certificates (``--client-ca-file``) and clients trust
    it for the serving certificate, so one CA is enough for a test cluster. Its own key and
    every key it issues share one algorithm and one encoding.

    Args:
        common_name: The CA's CN.
        organization: An O attribute for the CA's subject, if any.
        alt_names: Subject alternative names for the CA itself (DNS names or IPs), for a
            verifier that checks the CA like a leaf certificate for a name.
        key_algorithm: ``"ec-p256"`` (default) or ``"rsa-2048"``.
        key_encoding: ``"pkcs8"`` (default) or ``"pkcs1"`` (RSA only) for every ``key_pem``.
        validity: How long the CA and the certificates it issues stay valid from now.

    Raises:
        ValueError: ``pkcs1`` was asked for a key that is not RSA.
    """

    def __init__(
        self,
        common_name: str = "devcluster-ca",
        *,
        organization: str | None = None,
        alt_names: Sequence[str] = (),
        key_algorithm: KeyAlgorithm = "ec-p256",
        key_encoding: KeyEncoding = "pkcs8",
        validity: dt.timedelta = _VALIDITY,
    ) -> None:
        if key_encoding == "pkcs1" and key_algorithm != "rsa-2048":
            raise ValueError(f"PKCS#1 encodes RSA keys only, not {key_algorithm}")
        self._algorithm: KeyAlgorithm = key_algorithm
        self._encoding: KeyEncoding = key_encoding
        self._validity = validity
        self._key = _new_key(key_algorithm)
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization is not None:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        self._name = x509.Name(attributes)
        builder = (
            _builder(self._name, self._name, self._key, validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(self._key, ca=True), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
        )
        if alt_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(_alt_names(alt_names)), critical=False
            )
        self._cert = builder.sign(self._key, hashes.SHA256())

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate, PEM-encoded."""
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        """The CA's private key, PEM-encoded in the CA's key encoding."""
        return _key_pem(self._key, self._encoding)

    def _issue(
        self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> KeyPair:
        key = _new_key(self._algorithm)
        builder = (
            _builder(subject, self._name, key, self._validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(key, ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key, self._encoding))

    def serving_cert(self, hosts: list[str]) -> KeyPair:
        """Issue a TLS server certificate.

        Args:
            hosts: DNS names and IP addresses the server answers on; IPs become IP SANs.
        """
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, _alt_names(hosts))

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
