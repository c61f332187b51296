"""JSON Web Tokens of the OAuth JWT-bearer grant (RFC 7523), on PyJWT (a maintained JOSE library):
the recipient's client signs an assertion with its private key (`sign_jwt`), the server's token
endpoint verifies it with the public key registered for that client (`verify_assertion`).

Owns the choices PyJWT leaves to its caller:
1. Algorithms are pinned by the registered key's type — RSA keys verify RS256/384/512 and
   PS256/384/512 only, an EC key only the ES algorithm of its curve, an Ed25519/Ed448 key only
   EdDSA — so `none`, an HMAC algorithm keyed with the public key, or another key type's algorithm
   are refused whatever the token's header says (algorithm confusion).
2. Claims: `exp`, `iss`, `aud` and `jti` are required; `iss` must be the client, `aud` one of the
   token endpoint's URLs; `exp`, `nbf` and `iat` are checked with `CLOCK_SKEW` seconds of leeway,
   and `exp` may lie at most `MAX_ASSERTION_SECONDS` ahead.
Keys are PEM (private: PKCS#8 or traditional, unencrypted; public: SubjectPublicKeyInfo).
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from ..errors import DeltaError

__all__ = ["JWT_ALGORITHMS", "JwtError", "sign_jwt", "verify_assertion", "unverified_claims", "load_public_key",
           "algorithm_for_key", "algorithms_for_key", "MAX_ASSERTION_SECONDS", "CLOCK_SKEW"]

JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MAX_ASSERTION_SECONDS = 600   # how far ahead an assertion may expire
CLOCK_SKEW = 60               # leeway on exp, nbf and iat


class JwtError(DeltaError, ValueError):
    """A JWT that cannot be made or does not verify; `reason` is a short, stable word for metrics
    (signature, algorithm, audience, issuer, expired, immature, claims, format, lifetime)."""

    def __init__(self, message: str, reason: str = "format"):
        super().__init__(message)
        self.reason = reason


def _jwt():
    import jwt

    return jwt


def load_public_key(pem: str | bytes):
    """A PEM public key (JwtError if it is not one of the kinds JWTs are signed with)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    try:
        key = serialization.load_pem_public_key(pem.encode() if isinstance(pem, str) else pem)
    except (ValueError, TypeError) as e:
        raise JwtError(f"not a PEM public key: {e}") from None
    if not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey, ed25519.Ed25519PublicKey,
                            ed448.Ed448PublicKey)):
        raise JwtError(f"{type(key).__name__} keys do not sign JWTs (use RSA, EC or Ed25519/Ed448)")
    return key


def algorithms_for_key(key: Any) -> list[str]:
    """The algorithms a (public or private) key may verify or sign: pinned by its type."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)):
        return ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
    if isinstance(key, (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey)):
        alg = {256: "ES256", 384: "ES384", 521: "ES512"}.get(key.curve.key_size)
        if alg is None:
            raise JwtError(f"EC keys on {key.curve.name} do not sign JWTs (use P-256, P-384 or P-521)")
        return [alg]
    return ["EdDSA"]


def algorithm_for_key(key: Any) -> str:
    """The usual JWT algorithm of a key: RS256, ES256/384/512 by curve, EdDSA."""
    return algorithms_for_key(key)[0]


def sign_jwt(header: dict, claims: dict, private_key_pem: bytes) -> str:
    """The compact JWS of `claims`, signed with the PEM private key by `header["alg"]`."""
    from cryptography.hazmat.primitives import serialization

    alg = header.get("alg")
    if alg not in JWT_ALGORITHMS:
        raise JwtError(f"JWT algorithm {alg!r} is not supported (supported: {', '.join(JWT_ALGORITHMS)})",
                       "algorithm")
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise JwtError(f"not a usable unencrypted PEM private key: {e}") from None
    if alg not in algorithms_for_key(key):
        raise JwtError(f"a {type(key).__name__} cannot sign {alg} JWTs", "algorithm")
    extra = {k: v for k, v in header.items() if k != "alg"}
    return _jwt().encode(claims, key, algorithm=alg, headers=extra or None)


def unverified_claims(token: str) -> dict:
    """The claims of a JWT, not verified (to find whose key verifies it)."""
    jwt = _jwt()
    if not isinstance(token, str) or token.count(".") != 2:
        raise JwtError("expected three dot-separated parts")
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as e:
        raise JwtError(f"not a JWT ({e})") from None
    if not isinstance(claims, dict):
        raise JwtError("its claims are not a JSON object")
    return claims


def verify_assertion(token: str, public_key: Any, *, issuer: str, audiences: Iterable[str],
                     now: float | None = None) -> tuple[dict, dict]:
    """(header, claims) of an assertion that verifies with `public_key` (key object or PEM), from
    `issuer`, for one of `audiences`, inside its validity (see the module docstring); JwtError
    otherwise."""
    jwt = _jwt()
    key = load_public_key(public_key) if isinstance(public_key, (str, bytes)) else public_key
    allowed = algorithms_for_key(key)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise JwtError(f"not a JWT ({e})") from None
    if header.get("alg") not in allowed:
        raise JwtError(f"algorithm {header.get('alg')!r} is not accepted for this client's key "
                       f"(accepted: {', '.join(allowed)})", "algorithm")
    try:
        claims = jwt.decode(token, key, algorithms=allowed, audience=list(audiences), issuer=issuer,
                            leeway=CLOCK_SKEW, options={"require": ["exp", "iss", "aud", "jti"]})
    except jwt.ExpiredSignatureError:
        raise JwtError("the assertion has expired", "expired") from None
    except jwt.ImmatureSignatureError as e:
        raise JwtError(f"the assertion is not valid yet ({e})", "immature") from None
    except jwt.InvalidAudienceError:
        raise JwtError("the assertion is for another audience (aud must be this token endpoint)", "audience") from None
    except jwt.InvalidIssuerError:
        raise JwtError("the assertion's issuer is not the client", "issuer") from None
    except jwt.MissingRequiredClaimError as e:
        raise JwtError(f"the assertion has no {e.claim}", "claims") from None
    except jwt.InvalidAlgorithmError as e:
        raise JwtError(f"the assertion's algorithm is not accepted ({e})", "algorithm") from None
    except jwt.InvalidSignatureError:
        raise JwtError("the assertion's signature does not verify", "signature") from None
    except jwt.PyJWTError as e:
        raise JwtError(f"the assertion does not verify ({e})") from None
    now = time.time() if now is None else now
    exp = claims["exp"]
    if exp > now + MAX_ASSERTION_SECONDS:
        raise JwtError(f"the assertion lives too long (at most {MAX_ASSERTION_SECONDS} s)", "lifetime")
    if not isinstance(claims["jti"], str) or not claims["jti"]:
        raise JwtError("the assertion has no jti", "claims")
    return header, claims
