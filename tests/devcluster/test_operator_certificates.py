"""The harness's webhook material meets every rule of the operator's cert rotator.

open-policy-agent/cert-controller v0.16.0 (used by the Training Operator v1.9.4) keeps a
Secret as it is only if: the CA key parses as PKCS#1, the CA verifies for the DNS name
``training-operator-ca``, the server certificate verifies against that CA for
``training-operator.<namespace>.svc`` with the server-auth usage, and both stay valid past a
90-day look-ahead. Otherwise it writes new material into the Secret, which would then differ
from the files the harness wrote for the webhook server.
"""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from devcluster.operator import CA_NAME, webhook_certificates

LOOKAHEAD = dt.timedelta(days=90)
MATERIAL = webhook_certificates("kubeflow")


def sans(cert: x509.Certificate) -> list[str]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in names]


def test_the_keys_are_pkcs1_rsa_as_the_rotator_parses_them() -> None:
    assert MATERIAL.ca_key.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert MATERIAL.tls_key.startswith(b"-----BEGIN RSA PRIVATE KEY-----")


def test_the_ca_names_itself_and_outlives_the_lookahead() -> None:
    ca = x509.load_pem_x509_certificate(MATERIAL.ca_crt)
    assert sans(ca) == [CA_NAME]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.not_valid_after_utc > dt.datetime.now(dt.UTC) + LOOKAHEAD


def test_the_server_certificate_is_for_the_webhook_service_signed_by_the_ca() -> None:
    ca = x509.load_pem_x509_certificate(MATERIAL.ca_crt)
    server = x509.load_pem_x509_certificate(MATERIAL.tls_crt)
    assert sans(server) == ["training-operator.kubeflow.svc", "127.0.0.1"]
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert server.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    assert server.not_valid_after_utc > dt.datetime.now(dt.UTC) + LOOKAHEAD


def test_the_secret_holds_the_four_keys_the_rotator_reads() -> None:
    assert sorted(MATERIAL.secret_data()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert isinstance(
        x509.load_pem_x509_certificate(MATERIAL.tls_crt).public_key(), rsa.RSAPublicKey
    )
