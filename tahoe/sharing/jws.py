"""JSON Web Tokens signed with a key pair (RFC 7515 compact JWS, RFC 7519 claims), as the OAuth
JWT-bearer grant (RFC 7523) uses them: the recipient's client signs an assertion with its private
key (`sign_jwt`), the server's token endpoint verifies it with the public key registered for that
client (`verify_jwt`).

Algorithms: RS256/384/512 (RSA PKCS#1 v1.5), PS256/384/512 (RSA-PSS), ES256/384/512 (ECDSA,
the signature as r‖s) and EdDSA (Ed25519/Ed448); never `none`. Keys are PEM (private: PKCS#8 or
traditional, unencrypted; public: SubjectPublicKeyInfo). The cryptography package does the
arithmetic; without it, JWT profiles and JWT clients are refused with a message saying so.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..errors import DeltaError

__all__ = ["JWT_ALGORITHMS", "JwtError", "sign_jwt", "verify_jwt", "load_public_key", "algorithm_for_key"]

JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class JwtError(DeltaError, ValueError):
    """A JWT that cannot be made or does not verify (bad key, algorithm, signature, format)."""


def _crypto():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
        from cryptography.hazmat.primitives.asymmetric import utils
    except ImportError:
        raise JwtError("JSON Web Tokens need the cryptography package (pip install cryptography)") from None
    return hashes, serialization, ec, ed448, ed25519, padding, rsa, utils


def _b64e(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def _b64d(s: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        raise JwtError("not a JWT (bad base64url)") from None


def _digest(alg: str):
    hashes = _crypto()[0]
    return {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}[alg[2:]]


def load_public_key(pem: str | bytes):
    """A PEM public key (JwtError if it is not one of the kinds JWTs are signed with)."""
    _, serialization, ec, ed448, ed25519, _, rsa, _ = _crypto()
    try:
        key = serialization.load_pem_public_key(pem.encode() if isinstance(pem, str) else pem)
    except (ValueError, TypeError) as e:
        raise JwtError(f"not a PEM public key: {e}") from None
    if not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey, ed25519.Ed25519PublicKey,
                            ed448.Ed448PublicKey)):
        raise JwtError(f"{type(key).__name__} keys do not sign JWTs (use RSA, EC or Ed25519/Ed448)")
    return key


def algorithm_for_key(key: Any) -> str:
    """The usual JWT algorithm of a (public or private) key: RS256, ES256/384/512 by curve, EdDSA."""
    _, _, ec, ed448, ed25519, _, rsa, _ = _crypto()
    if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)):
        return "RS256"
    if isinstance(key, (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey)):
        return {256: "ES256", 384: "ES384", 521: "ES512"}.get(key.curve.key_size, "ES256")
    return "EdDSA"


def sign_jwt(header: dict, claims: dict, private_key_pem: bytes) -> str:
    """The compact JWS of `claims`, signed with the PEM private key by `header["alg"]`."""
    _, serialization, ec, _, _, padding, _, utils = _crypto()
    alg = header.get("alg")
    if alg not in JWT_ALGORITHMS:
        raise JwtError(f"JWT algorithm {alg!r} is not supported (supported: {', '.join(JWT_ALGORITHMS)})")
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise JwtError(f"not a usable unencrypted PEM private key: {e}") from None
    signing_input = (_b64e(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     _b64e(json.dumps(claims, separators=(",", ":")).encode())).encode("ascii")
    try:
        if alg.startswith("RS"):
            sig = key.sign(signing_input, padding.PKCS1v15(), _digest(alg))
        elif alg.startswith("PS"):
            d = _digest(alg)
            sig = key.sign(signing_input, padding.PSS(mgf=padding.MGF1(d), salt_length=d.digest_size), d)
        elif alg.startswith("ES"):
            r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(_digest(alg))))
            n = (key.curve.key_size + 7) // 8
            sig = r.to_bytes(n, "big") + s.to_bytes(n, "big")
        else:
            sig = key.sign(signing_input)
    except (AttributeError, TypeError, ValueError) as e:
        raise JwtError(f"a {type(key).__name__} cannot sign {alg} JWTs ({e})") from None
    return signing_input.decode("ascii") + "." + _b64e(sig)


def verify_jwt(token: str, public_key: Any) -> tuple[dict, dict]:
    """(header, claims) of a JWT whose signature verifies with `public_key` (a key object or
    PEM); JwtError otherwise. Only the signature is checked here: the claims (issuer, audience,
    expiry, ...) are the caller's to check."""
    _, _, ec, ed448, ed25519, padding, rsa, utils = _crypto()
    try:
        from cryptography.exceptions import InvalidSignature
    except ImportError:  # pragma: no cover - _crypto() has refused already
        raise JwtError("JSON Web Tokens need the cryptography package (pip install cryptography)") from None

    key = load_public_key(public_key) if isinstance(public_key, (str, bytes)) else public_key
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise JwtError("not a JWT (expected three dot-separated parts)")
    try:
        header, claims = json.loads(_b64d(parts[0])), json.loads(_b64d(parts[1]))
    except ValueError:
        raise JwtError("not a JWT (its header or claims are not JSON)") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JwtError("not a JWT (its header and claims must be JSON objects)")
    alg = header.get("alg")
    if alg not in JWT_ALGORITHMS:
        raise JwtError(f"JWT algorithm {alg!r} is not accepted (accepted: {', '.join(JWT_ALGORITHMS)})")
    sig = _b64d(parts[2])
    data = (parts[0] + "." + parts[1]).encode("ascii")
    try:
        if alg[:2] in ("RS", "PS"):
            if not isinstance(key, rsa.RSAPublicKey):
                raise JwtError(f"{alg} needs an RSA key")
            d = _digest(alg)
            pad = padding.PKCS1v15() if alg.startswith("RS") else padding.PSS(mgf=padding.MGF1(d),
                                                                             salt_length=padding.PSS.AUTO)
            key.verify(sig, data, pad, d)
        elif alg.startswith("ES"):
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise JwtError(f"{alg} needs an EC key")
            n = (key.curve.key_size + 7) // 8
            if len(sig) != 2 * n:
                raise JwtError("bad ECDSA signature length")
            der = utils.encode_dss_signature(int.from_bytes(sig[:n], "big"), int.from_bytes(sig[n:], "big"))
            key.verify(der, data, ec.ECDSA(_digest(alg)))
        else:
            if not isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
                raise JwtError("EdDSA needs an Ed25519 or Ed448 key")
            key.verify(sig, data)
    except InvalidSignature:
        raise JwtError("the JWT's signature does not verify") from None
    return header, claims
