"""EKS tokens: format, the signed parameters, and a signature recomputed independently of botocore."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import parse_qsl, quote, urlsplit

from botocore.credentials import Credentials

from carpool.adapters.k8s import token as eks

CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token="session-token/+=")


def decode_token(token: str) -> str:
    """The presigned URL inside a token, decoded as the EKS authenticator does (independently of carpool)."""
    if not token.startswith(eks.TOKEN_PREFIX):
        raise ValueError(f"not an EKS token: does not start with {eks.TOKEN_PREFIX}")
    body = token[len(eks.TOKEN_PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def url_of(tok: str) -> tuple[str, dict[str, str]]:
    url = decode_token(tok)
    return url, dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def test_token_format() -> None:
    tok = eks.eks_token("prod-cluster", "eu-west-1", CREDS)
    assert tok.startswith("k8s-aws-v1.")
    body = tok[len("k8s-aws-v1.") :]
    assert "=" not in body and "+" not in body and "/" not in body  # base64url, unpadded
    url = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    assert url.startswith("https://sts.eu-west-1.amazonaws.com/?")
    assert decode_token(tok) == url


def test_signed_parameters() -> None:
    _, q = url_of(eks.eks_token("prod-cluster", "eu-west-1", CREDS))
    assert q["Action"] == "GetCallerIdentity"
    assert q["Version"] == "2011-06-15"
    assert q["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert q["X-Amz-Expires"] == "60"
    assert q["X-Amz-SignedHeaders"] == "host;x-k8s-aws-id"
    assert q["X-Amz-Security-Token"] == "session-token/+="
    access_key, date, region, service, terminator = q["X-Amz-Credential"].split("/")
    assert (access_key, region, service, terminator) == ("AKIDEXAMPLE", "eu-west-1", "sts", "aws4_request")
    assert q["X-Amz-Date"].startswith(date) and len(q["X-Amz-Signature"]) == 64


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _expected_signature(url: str, cluster: str, secret: str) -> str:
    """SigV4 query signing done by hand (AWS General Reference, "Create a signed request")."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "X-Amz-Signature"]
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params))
    canonical_headers = f"host:{parts.netloc}\nx-k8s-aws-id:{cluster}\n"
    payload_hash = hashlib.sha256(b"").hexdigest()
    canonical_request = "\n".join(
        ["GET", parts.path or "/", canonical_query, canonical_headers, "host;x-k8s-aws-id", payload_hash]
    )
    q = dict(params)
    scope = q["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", q["X-Amz-Date"], scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    date, region, service, _ = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), region), service), "aws4_request")
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_signature_covers_the_cluster_header() -> None:
    url, q = url_of(eks.eks_token("prod-cluster", "us-east-1", CREDS))
    assert q["X-Amz-Signature"] == _expected_signature(url, "prod-cluster", CREDS.secret_key)
    # the same URL does not verify for another cluster: a token is bound to its cluster
    assert q["X-Amz-Signature"] != _expected_signature(url, "other-cluster", CREDS.secret_key)


def test_china_regions_use_their_sts_domain() -> None:
    url, _ = url_of(eks.eks_token("c", "cn-north-1", CREDS))
    assert urlsplit(url).netloc == "sts.cn-north-1.amazonaws.com.cn"


def test_provider_reuses_a_token_until_refresh_time() -> None:
    clock = [0.0]
    made = []

    def creds() -> Credentials:
        made.append(1)
        return CREDS

    provider = eks.EksTokenProvider(
        "c", "us-east-1", credentials=creds, clock=lambda: clock[0], refresh_after=600
    )
    assert provider.stale
    first = provider.token()
    clock[0] = 599
    assert provider.token() == first and not provider.stale and len(made) == 1
    clock[0] = 600
    assert provider.stale
    provider.token()
    assert len(made) == 2
