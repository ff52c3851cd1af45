"""`carpool.amis.AmiSource` on boto3: SSM alias parameters plus paginated DescribeImages.

Deprecated images are included on purpose: AMI resolution prefers non-deprecated ones but may still need
a deprecated image that a NodeClass pins by id or name, and DescribeImages hides them by default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from carpool.adapters.aws import session
from carpool.adapters.aws.ssm import SsmParameters
from carpool.clocks import Clock


class AwsAmiSource:
    """Implements `carpool.amis.AmiSource` (`get_parameter`, `describe_images`)."""

    def __init__(self, parameters: SsmParameters | None = None, ec2_client: Any | None = None) -> None:
        self.parameters = parameters if parameters is not None else SsmParameters()
        self.client = ec2_client if ec2_client is not None else session.client("ec2")

    def follow_clock(self, clock: Clock) -> None:
        """The parameter reads' cache expires by `clock` (see `SsmParameters.follow_clock`)."""
        self.parameters.follow_clock(clock)

    def get_parameter(self, path: str) -> str | None:
        return self.parameters.get_parameter(path)

    def get_parameters(self, paths: Iterable[str]) -> dict[str, str | None]:
        """Several parameters in one GetParameters (see `SsmParameters.get_parameters`)."""
        return self.parameters.get_parameters(paths)

    def describe_images(
        self,
        image_ids: list[str] | None = None,
        filters: list[dict[str, Any]] | None = None,
        owners: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Images by id are asked with the `image-id` filter, as Karpenter asks: EC2 refuses `ImageIds` naming
        one that does not exist (`InvalidAMIID.NotFound`) for the whole request, the filter answers those
        that exist (a term selecting none is the node class's AMIsReady=False, not a failed read)."""
        kwargs: dict[str, Any] = {"IncludeDeprecated": True}
        wanted = list(filters or [])
        if image_ids:
            wanted.append({"Name": "image-id", "Values": list(image_ids)})
        if wanted:
            kwargs["Filters"] = wanted
        if owners:
            kwargs["Owners"] = list(owners)
        pages = self.client.get_paginator("describe_images").paginate(**kwargs)
        return [image for page in pages for image in page.get("Images", [])]
