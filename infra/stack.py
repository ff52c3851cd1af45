"""``CarpoolStack``: one stack per EKS cluster, composed of one construct per concern.

Everything a cluster needs lives in one stack named ``carpool-<cluster>`` so that ``cdk deploy`` and
``cdk destroy`` are the whole lifecycle, and two clusters in one account never share a bus, a table or a
role. The constructs are wired here and nowhere else: state, cluster access, events, functions, monitoring,
then the cdk-nag suppressions (which need to see all of them). The NodePools and EC2NodeClasses are not in
the stack: they live in the cluster (``-c configFile`` is only checked, ``infra/config_file.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, CfnOutput, Stack, Tags
from constructs import Construct

from infra.cluster import ClusterAccess
from infra.config_file import CheckedConfig, check_config_file
from infra.events import EventRouting
from infra.functions import FUNCTIONS_DIR, QUEUE_CONSUMERS, SPECS, Functions
from infra.layer import LAYER_DIR
from infra.monitoring import Monitoring
from infra.nag import add_suppressions
from infra.nodeclasses import check, needs_of
from infra.settings import DEFAULT_KARPENTER_NAMESPACE, Settings
from infra.state import StateTables


def kubernetes_access_setup(group: str, karpenter_namespace: str = DEFAULT_KARPENTER_NAMESPACE) -> str:
    """The command that grants the functions' Kubernetes group what carpool uses (`infra/rbac.yaml`): its
    ClusterRole, and its Role on Karpenter's Lease in `karpenter_namespace`."""
    return (f"kubectl apply -f infra/rbac.yaml --namespace {karpenter_namespace} && "
            f"kubectl create clusterrolebinding carpool-controller --clusterrole=carpool-controller --group={group} && "
            f"kubectl create rolebinding carpool-karpenter-lease --namespace {karpenter_namespace} "
            f"--role=carpool-karpenter-lease --group={group}")


class CarpoolStack(Stack):
    """carpool for one EKS cluster (see ``infra/settings.py`` for every parameter)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        layer_dir: Path = LAYER_DIR,
        functions_dir: Path = FUNCTIONS_DIR,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"carpool: serverless node autoscaler for EKS cluster {settings.cluster_name}",
            **kwargs,
        )
        self.settings = settings
        # Not carpool.dev/cluster: that tag means "carpool may terminate/delete this" to the IAM policies.
        Tags.of(self).add("carpool.dev/deployment", settings.cluster_name)

        self.tables = StateTables(self, "State", retain_state=settings.retain_state)
        self.cluster = ClusterAccess(self, "Cluster", settings=settings)
        #: ``-c configFile``, judged and checked against this deployment's grants; never stored
        self.checked_config: CheckedConfig | None = self._check_config_file()
        self.routing = EventRouting(
            self, "Events", settings=settings, timeouts={name: SPECS[name].timeout for name in QUEUE_CONSUMERS}
        )
        self.functions = Functions(
            self,
            "Functions",
            settings=settings,
            tables=self.tables,
            routing=self.routing,
            cluster=self.cluster,
            layer_dir=layer_dir,
            functions_dir=functions_dir,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            settings=settings,
            functions=self.functions.functions,
            work_queues={name: work.queue for name, work in self.routing.work_queues.items()},
            dead_letter_queues=self.routing.dead_letter_queues,
            log_groups=self.functions.log_groups,
        )
        self._outputs()
        self._warn_unheard_alarms()
        add_suppressions(self)

    def _check_config_file(self) -> CheckedConfig | None:
        """F of ``-c configFile``: refused by field when invalid or asking for what this deployment does not
        grant; else one line, on stderr and as a synth annotation, saying it is not stored and how to apply it."""
        if self.settings.config_file is None:
            return None
        checked = check_config_file(self.settings.config_file)
        known_role = self.settings.node_role_arn.rsplit("/", 1)[-1] if self.settings.node_role_arn else None
        check(needs_of(checked.manifests), self.settings, checked.source, known_role)
        for line in (*checked.warnings, checked.how_to_apply()):
            print(f"carpool: {line}", file=sys.stderr)
        Annotations.of(self).add_info(checked.how_to_apply())
        return checked

    def _warn_unheard_alarms(self) -> None:
        """Alarms notify the topic; without ``-c alarmEmail`` nobody is subscribed unless the operator adds a
        subscriber, which a synth should say rather than leave to the first outage."""
        if self.settings.alarm_email:
            return
        Annotations.of(self).add_warning_v2(
            "carpool:AlarmsWithoutSubscriber",
            "no alarm subscriber: carpool's alarms notify the AlarmTopicArn topic, which nobody is subscribed "
            "to; deploy with -c alarmEmail=you@example.com or subscribe your own endpoint to the topic",
        )

    def _outputs(self) -> None:
        """What an operator needs after ``cdk deploy`` (the watcher is the first thing to check)."""
        outputs: dict[str, tuple[str, str]] = {
            "EventBusName": (self.routing.bus.event_bus_name, "carpool bus; the watcher puts events here"),
            "StateTableName": (self.tables.state.table_name, "claims, pool usage, unavailable offerings"),
            "NodeRoleArn": (self.cluster.node_role.role_arn, "role carpool nodes run as"),
            "NodeRoleName": (self.cluster.node_role.role_name, "spec.role of your EC2NodeClasses"),
            "InstanceProfileName": (self.cluster.instance_profile.instance_profile_name, "its instance profile"),
            "DashboardName": (self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        for name, function in self.functions.functions.items():
            outputs[f"{name.title()}FunctionName"] = (function.function_name, f"the {name} Lambda function")
            outputs[f"{name.title()}RoleArn"] = (self.functions.roles[name].role_arn, f"the {name} role")
        if self.monitoring.topic is not None:
            outputs["AlarmTopicArn"] = (self.monitoring.topic.topic_arn, "subscribe here for alarms")
        if self.settings.access_entries and self.settings.kubernetes_group:
            outputs["KubernetesAccessSetup"] = (kubernetes_access_setup(self.settings.kubernetes_group,
                                                                        self.settings.karpenter_namespace),
                                                "run once, from the carpool checkout: the functions' RBAC")
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)
