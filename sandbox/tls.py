"""TLS material of a sandbox started with ``up --client-tls``: a certificate authority of its own and one broker
key pair it signed, valid for every broker host's address.

The brokers' client listener (``SSL`` or, with ``--client-sasl``, ``SASL_SSL``) serves the broker certificate from
a PKCS12 keystore (``ssl.keystore.type=PKCS12``, Kafka's default type since 3.0); clients trust the CA
(``ssl.ca.location`` for librdkafka, ``ssl_cafile`` for kafka-python) and check the broker's address against the
certificate's subject alternative names (librdkafka's ``ssl.endpoint.identification.algorithm=https``, its default
since 2.0; Python's ``ssl`` hostname check), so each host is listed there as an IP address. No client certificate
is asked for (``ssl.client.auth=none``) unless ``up --client-auth``: then the listener requires one
(``ssl.client.auth=required``), trusting the same CA (a PEM truststore, KIP-651), and :func:`write` makes the
connection's key pair too (``client.pem``, ``client.key``: the ``ssl.certificate.location`` and ``ssl.key.location``
of librdkafka, ``ssl_certfile`` and ``ssl_keyfile`` of kafka-python).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

#: Files in the material's directory.
CA_FILE = "ca.pem"
KEYSTORE_FILE = "broker.p12"
CLIENT_CERT_FILE = "client.pem"
CLIENT_KEY_FILE = "client.key"  # PKCS8 PEM, not encrypted: readable by its owner only
#: The client certificate's subject common name (Kafka's principal for it: ``User:CN=kafkaops,O=kafka-ops sandbox``).
CLIENT_NAME = "kafkaops"
VALID_DAYS = 30  # a sandbox lives for hours


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-ops sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def write(directory: Path, addresses: list[str], password: str, client: bool = False) -> tuple[Path, Path]:
    """Write the CA certificate (``ca.pem``) and the brokers' keystore (``broker.p12``: the broker key, its
    certificate for every address in ``addresses`` (IPv4/IPv6 literals, as subject alternative names) and the CA
    certificate, protected by ``password``) into ``directory`` (created; the keystore readable by its owner only).
    ``client``: also a client key pair signed by the same CA (``client.pem``, ``client.key``; extended key usage
    clientAuth, subject ``CN=kafkaops``), for a listener with ``ssl.client.auth=required``.

    Returns:
        (the CA certificate's path, the keystore's path).

    Raises:
        ValueError: an address that is not an IP literal, or no address.
    """
    if not addresses:
        raise ValueError("no broker address to certify")
    ips = [ipaddress.ip_address(a) for a in addresses]
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kafka-ops sandbox CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("kafka-ops sandbox broker")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ip) for ip in ips]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, keystore_path = directory / CA_FILE, directory / KEYSTORE_FILE
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                  .kdf_rounds(10_000).key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
                  .hmac_hash(hashes.SHA256()).build(password.encode()))
    keystore_path.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, cert, [ca], encryption))
    keystore_path.chmod(0o600)
    if client:
        _write_client(directory, ca, ca_key, start, end)
    return ca_path, keystore_path


def _write_client(directory: Path, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
                  start: datetime.datetime, end: datetime.datetime) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(CLIENT_NAME)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (directory / CLIENT_CERT_FILE).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = directory / CLIENT_KEY_FILE
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
