"""EKS bearer tokens, made the way `aws eks get-token` makes them, without the AWS CLI.

An EKS token is a presigned STS `GetCallerIdentity` URL: the API server's authenticator calls STS with it
and learns which IAM role is asking. The `x-k8s-aws-id: <cluster>` header is part of the signature, so a
token for one cluster is useless against another. Format: `k8s-aws-v1.` + base64url(URL) without padding.

Presigning is pure computation (no network call), so a token can be built and verified offline. EKS
accepts a token for 15 minutes after its `X-Amz-Date`, whatever `X-Amz-Expires` says (60 s, as the CLI);
`EksTokenProvider` refreshes well before that, since a warm Lambda outlives any single token.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from botocore.credentials import Credentials
from botocore.hooks import HierarchicalEmitter
from botocore.model import ServiceId
from botocore.signers import RequestSigner

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60
#: Tokens are reused this long (EKS honours them for 15 minutes).
REFRESH_AFTER_SECONDS = 10 * 60


def sts_endpoint(region: str) -> str:
    """The regional STS endpoint (EKS validates against the region's STS; China uses its own domain)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://sts.{region}.{suffix}"


def presigned_caller_identity_url(cluster_name: str, region: str, credentials: Credentials) -> str:
    """A GetCallerIdentity URL signed (SigV4, query auth) with the cluster header, valid 60 seconds."""
    emitter = HierarchicalEmitter()  # the signer only keeps a weak reference: hold it for the call
    signer = RequestSigner(ServiceId("STS"), region, "sts", "v4", credentials, emitter)
    request = {
        "method": "GET",
        "url": f"{sts_endpoint(region)}/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {},
        "headers": {CLUSTER_ID_HEADER: cluster_name},
        "context": {},
    }
    return str(
        signer.generate_presigned_url(
            request, region_name=region, expires_in=URL_EXPIRES_SECONDS, operation_name=""
        )
    )


def encode_token(url: str) -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def eks_token(cluster_name: str, region: str, credentials: Credentials) -> str:
    return encode_token(presigned_caller_identity_url(cluster_name, region, credentials))


def _default_credentials() -> Credentials:
    from carpool.adapters.aws import session

    credentials = session.session().get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials to sign an EKS token with")
    return credentials


class EksTokenProvider:
    """A cached token for one cluster, re-signed after `refresh_after` seconds."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        credentials: Callable[[], Any] = _default_credentials,
        clock: Callable[[], float] = time.monotonic,
        refresh_after: float = REFRESH_AFTER_SECONDS,
    ) -> None:
        self.cluster_name = cluster_name
        self.region = region
        self._credentials = credentials
        self._clock = clock
        self._refresh_after = refresh_after
        self._token = ""
        self._made_at = 0.0

    @property
    def stale(self) -> bool:
        return not self._token or self._clock() - self._made_at >= self._refresh_after

    def token(self) -> str:
        if self.stale:
            self._token = eks_token(self.cluster_name, self.region, self._credentials())
            self._made_at = self._clock()
        return self._token
