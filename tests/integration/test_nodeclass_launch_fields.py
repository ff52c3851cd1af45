"""EC2NodeClass fields through the whole launch path on local EC2: the launch template as created and the
CreateFleet request as sent carry `associatePublicIPAddress`, `detailedMonitoring`, `context` and the IMDS
defaults (`carpool.app.launching`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from carpool_env import MakeDeps, helper_client, manifests, nodeclass, nodepool, pending_pods

from carpool.app.provisioning import provision

POOL = nodepool(requirements={"node.kubernetes.io/instance-type": ["m5.large"],
                              "karpenter.sh/capacity-type": ["on-demand"]})
CONTEXT = "arn:aws:ec2:us-east-1:123456789012:context/ctx-0123"


def _sent(deps: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every `operation` the dependencies' EC2 client sends from now on."""
    sent: list[dict[str, Any]] = []
    deps.compute.client.meta.events.register(f"provide-client-params.ec2.{operation}",
                                             lambda params, **_: sent.append(dict(params)))
    return sent


def test_network_monitoring_context_and_imds_reach_ec2(aws: Any, make_deps: MakeDeps) -> None:
    doc = nodeclass(tags={"carpool-test": "launch-fields"})
    doc["spec"] |= {"associatePublicIPAddress": True, "detailedMonitoring": True, "context": CONTEXT}
    deps = make_deps(manifests(POOL, doc), start=datetime.now(UTC))
    fleets = _sent(deps, "CreateFleet")
    outcome = provision.provision_pods(pending_pods(1, prefix="f", deps=deps), deps, reason="test")
    assert outcome.launched, outcome.failed
    assert [f.get("Context") for f in fleets] == [CONTEXT]
    ec2 = helper_client(aws, "ec2")
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["Monitoring"] == {"Enabled": True}
    (interface,) = data["NetworkInterfaces"]
    assert interface["AssociatePublicIpAddress"] is True and interface["DeviceIndex"] == 0 and interface["Groups"]
    assert "SecurityGroupIds" not in data
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1 and data["MetadataOptions"]["HttpTokens"] == "required"
