"""The EKS side of carpool's token: the API server's token webhook, answering as aws-iam-authenticator does.

carpool's functions authenticate with an EKS token (`carpool.adapters.k8s.token`): `k8s-aws-v1.` +
base64url of a presigned STS GetCallerIdentity URL whose signature covers the `x-k8s-aws-id: CLUSTER`
header. EKS's authenticator (aws-iam-authenticator, `pkg/token/token.go` `Verify`) refuses a token that is
not such a URL: the prefix, an https URL to an STS host of the partition, path `/`, only the query
parameters a presigned GetCallerIdentity carries, `Action=GetCallerIdentity`, `x-k8s-aws-id` among the
signed headers, and an `X-Amz-Date` no older than 15 minutes (the URL's own `X-Amz-Expires` is ignored).
It then calls STS with the URL and the cluster header, and maps the caller's ARN, canonicalised to the
IAM role (`arn:aws:sts::A:assumed-role/R/S` -> `arn:aws:iam::A:role/R`), through the cluster's access
entries to a username and groups. Unknown principals are refused.

Here STS is local AWS's (moto). moto reads the caller's access key only from an `Authorization` header
(`BaseResponse.get_access_key`), not from a presigned URL's `X-Amz-Credential`, so the query's SigV4
fields are sent as the equivalent header. moto checks no signature, real STS does (a token signed for
another cluster's `x-k8s-aws-id`, or with a wrong secret, is `SignatureDoesNotMatch`): so the signature is
checked here first, with SigV4's query-auth algorithm and the secret moto issued with the credentials
(`moto_secret`), before moto is asked who the caller is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

import httpx2

from carpool.adapters.k8s.token import CLUSTER_ID_HEADER, TOKEN_PREFIX

#: aws-iam-authenticator's `presignedURLExpiration`: a token is good this long after its X-Amz-Date
TOKEN_LIFETIME = timedelta(minutes=15)
#: the query parameters aws-iam-authenticator accepts (`parameterWhitelist`), lower-cased
ALLOWED_PARAMETERS = {"action", "version", "x-amz-algorithm", "x-amz-credential", "x-amz-date",
                      "x-amz-expires", "x-amz-security-token", "x-amz-signature", "x-amz-signedheaders"}
STS_HOST = re.compile(r"^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$")
ASSUMED_ROLE = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/(.+)$")


class TokenRefused(Exception):
    """Why a token does not authenticate (the TokenReview's `status.error`)."""


@dataclass(frozen=True)
class AccessEntry:
    """An EKS access entry: the principal (an IAM role ARN) and the Kubernetes identity it maps to. EKS's
    default username for a role is its assumed-role ARN with the session name (`{{SessionName}}`)."""

    principal_arn: str
    groups: tuple[str, ...]
    username: str = "{{SessionARN}}"


@dataclass(frozen=True)
class Identity:
    username: str
    uid: str
    groups: tuple[str, ...]
    arn: str


@dataclass
class Authenticator:
    """Verifies EKS tokens for one cluster against local STS and the cluster's access entries."""

    cluster_id: str
    sts_endpoint: str
    #: the secret key of an access key id, as STS knows it (None: an unknown key)
    secret_of: Callable[[str], str | None]
    entries: dict[str, AccessEntry] = field(default_factory=dict)
    now: Any = field(default=lambda: datetime.now(UTC))
    #: every decision, for tests: (ARN or None, refusal reason or None)
    decisions: list[tuple[str | None, str | None]] = field(default_factory=list)

    def add_entry(self, entry: AccessEntry) -> None:
        self.entries[entry.principal_arn] = entry

    def authenticate(self, token: str) -> Identity:
        url = decode(token)
        query = check_url(url, self.now())
        arn = self._caller_arn(url, query)
        role_arn = canonical_role_arn(arn)
        entry = self.entries.get(role_arn)
        if entry is None:
            raise TokenRefused(f"ARN is not mapped: {role_arn}")
        session = ASSUMED_ROLE.match(arn)
        username = entry.username.replace("{{SessionARN}}", arn).replace(
            "{{SessionName}}", session.group(4) if session else "")
        return Identity(username, f"aws-iam-authenticator:{arn}", entry.groups, arn)

    def _caller_arn(self, url: str, query: Mapping[str, str]) -> str:
        """GetCallerIdentity with the URL's query and the cluster header, at local STS."""
        key = query["X-Amz-Credential"].split("/")[0]
        secret = self.secret_of(key)
        if secret is None:
            raise TokenRefused("sts getCallerIdentity failed: InvalidClientTokenId")
        if not hmac.compare_digest(sigv4_query_signature(url, self.cluster_id, secret), query["X-Amz-Signature"]):
            raise TokenRefused("sts getCallerIdentity failed: SignatureDoesNotMatch")
        params = {k: v for k, v in query.items() if not k.lower().startswith("x-amz-")}
        headers = {CLUSTER_ID_HEADER: self.cluster_id, "Accept": "application/json",
                   "Authorization": (f"{query['X-Amz-Algorithm']} Credential={query['X-Amz-Credential']}, "
                                     f"SignedHeaders={query['X-Amz-SignedHeaders']}, "
                                     f"Signature={query['X-Amz-Signature']}"),
                   "X-Amz-Date": query["X-Amz-Date"]}
        if "X-Amz-Security-Token" in query:
            headers["X-Amz-Security-Token"] = query["X-Amz-Security-Token"]
        answer = httpx2.get(f"{self.sts_endpoint}/?{urlencode(params)}", headers=headers, timeout=10)
        if answer.status_code != 200:
            raise TokenRefused(f"sts getCallerIdentity failed: {answer.status_code} {answer.text[:200]}")
        return _arn_of(answer.text)

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A TokenReview answered (authentication.k8s.io/v1)."""
        token = str(body.get("spec", {}).get("token", ""))
        try:
            who = self.authenticate(token)
        except TokenRefused as refused:
            self.decisions.append((None, str(refused)))
            status: dict[str, Any] = {"authenticated": False, "error": str(refused)}
        else:
            self.decisions.append((who.arn, None))
            status = {"authenticated": True, "user": {"username": who.username, "uid": who.uid,
                                                      "groups": list(who.groups),
                                                      "extra": {"arn": [who.arn]}}}
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status}


def decode(token: str) -> str:
    if not token.startswith(TOKEN_PREFIX):
        raise TokenRefused("token is missing expected \"k8s-aws-v1.\" prefix")
    payload = token[len(TOKEN_PREFIX):]
    try:
        return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError) as bad:
        raise TokenRefused(f"malformed token: {bad}") from None


def check_url(url: str, now: datetime) -> dict[str, str]:
    """The presigned URL's query, once it is one aws-iam-authenticator would call STS with."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise TokenRefused(f"unexpected scheme {parts.scheme!r} in pre-signed URL")
    if not STS_HOST.match(parts.hostname or ""):
        raise TokenRefused(f"unexpected hostname {parts.hostname!r} in pre-signed URL")
    if parts.path != "/":
        raise TokenRefused("unexpected path in pre-signed URL")
    raw = parse_qs(parts.query, keep_blank_values=True)
    unknown = [k for k in raw if k.lower() not in ALLOWED_PARAMETERS]
    if unknown or any(len(v) != 1 for v in raw.values()):
        raise TokenRefused(f"non-whitelisted query parameter {unknown}")
    query = {k: v[0] for k, v in raw.items()}
    if query.get("Action") != "GetCallerIdentity":
        raise TokenRefused("unexpected action parameter in pre-signed URL")
    if CLUSTER_ID_HEADER not in query.get("X-Amz-SignedHeaders", "").split(";"):
        raise TokenRefused(f"client did not sign the {CLUSTER_ID_HEADER} header in the pre-signed URL")
    try:
        signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except (KeyError, ValueError):
        raise TokenRefused("error parsing X-Amz-Date parameter") from None
    if now > signed_at + TOKEN_LIFETIME:
        raise TokenRefused(f"X-Amz-Date parameter is expired ({TOKEN_LIFETIME} expiration) {signed_at}")
    for needed in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"):
        if needed not in query:
            raise TokenRefused(f"pre-signed URL has no {needed}")
    return query


def sigv4_query_signature(url: str, cluster_id: str, secret: str) -> str:
    """The SigV4 signature of a presigned GET (query auth), with the cluster header as STS receives it."""
    parts = urlsplit(url)
    pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "X-Amz-Signature"]
    query = dict(pairs)
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))
    headers = {"host": parts.netloc, CLUSTER_ID_HEADER: cluster_id}
    signed = query["X-Amz-SignedHeaders"].split(";")
    canonical_headers = "".join(f"{h}:{headers.get(h, '')}\n" for h in signed)
    canonical = "\n".join(["GET", parts.path or "/", canonical_query, canonical_headers, ";".join(signed),
                           hashlib.sha256(b"").hexdigest()])
    _key, date, region, service, terminator = query["X-Amz-Credential"].split("/")
    to_sign = "\n".join(["AWS4-HMAC-SHA256", query["X-Amz-Date"], f"{date}/{region}/{service}/{terminator}",
                         hashlib.sha256(canonical.encode()).hexdigest()])
    signing_key = ("AWS4" + secret).encode()
    for part in (date, region, service, terminator):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    return hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()


def moto_secret(account: str) -> Callable[[str], str | None]:
    """The secret of credentials local STS issued (AssumeRole) in `account`, by access key id."""
    from carpool.sim.localaws.in_process import assumed_role_secret

    def secret_of(access_key_id: str) -> str | None:
        return assumed_role_secret(account, access_key_id)
    return secret_of


def canonical_role_arn(arn: str) -> str:
    """aws-iam-authenticator's `arn.Canonicalize`: an assumed-role session is its role."""
    session = ASSUMED_ROLE.match(arn)
    if session:
        partition, account, role, _session = session.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return arn


def _arn_of(text: str) -> str:
    """The caller's ARN from GetCallerIdentity's answer (JSON when asked, else STS's XML)."""
    try:
        return str(json.loads(text)["GetCallerIdentityResponse"]["GetCallerIdentityResult"]["Arn"])
    except (ValueError, KeyError):
        found = re.search(r"<Arn>([^<]+)</Arn>", text)
        if not found:
            raise TokenRefused(f"no ARN in GetCallerIdentity's answer: {text[:200]}") from None
        return found.group(1)


class AuthenticatorServer:
    """The webhook on 127.0.0.1 (plain HTTP: only the API server of the same test calls it). `url` is what
    `ControlPlane(token_webhook_url=...)` takes."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(authenticator))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/authenticate"
        self._thread = threading.Thread(target=self._server.serve_forever, name="eks-authenticator", daemon=True)

    def __enter__(self) -> AuthenticatorServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(authenticator: Authenticator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            answer = json.dumps(authenticator.review(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            pass

    return Handler
