"""Topology spread node inclusion policies (nodeTaintsPolicy, nodeAffinityPolicy) and the DaemonSet
overhead of DaemonSets that select registered/initialized nodes, as Karpenter's scheduler applies them."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from sched_factories import GIB, pod, pods, pool, run, spread

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import ExistingNode, PodSpec
from carpool.taints import Taint, Toleration

WEB = {"app": "web"}
TAINT = Taint("dedicated", "NoSchedule", "gpu")


def web(n: int, *, honor_taints: bool = False, honor_affinity: bool = True, **kw) -> list[PodSpec]:
    c = replace(spread(L.ZONE, **WEB), honor_node_taints=honor_taints, honor_node_affinity=honor_affinity)
    return pods("web", n, labels=WEB, spread=(c,), **kw)


def zone_counts(result) -> dict[str, int]:
    return dict(Counter(c.zone for c in result.claims for _ in c.pods))


def two_pools():
    return [
        pool("open", reqs=[Requirement.in_(L.ZONE, "zone-a")]),
        pool("tainted", reqs=[Requirement.in_(L.ZONE, "zone-b")], taints=(TAINT,)),
    ]


def test_taints_ignored_by_default_so_an_untolerated_pool_domain_holds_the_skew():
    result = run(web(4), two_pools())
    assert zone_counts(result) == {"zone-a": 1}
    assert len(result.unschedulable) == 3


def test_taints_honored_drop_the_domains_of_pools_the_pod_does_not_tolerate():
    result = run(web(4, honor_taints=True), two_pools())
    assert zone_counts(result) == {"zone-a": 4}
    assert not result.unschedulable


def test_taints_honored_keep_the_domains_of_pools_the_pod_tolerates():
    tolerating = (Toleration("dedicated", "Equal", "gpu", "NoSchedule"),)
    result = run(web(4, honor_taints=True, tolerations=tolerating), two_pools())
    assert zone_counts(result) == {"zone-a": 2, "zone-b": 2}


def test_taints_honored_do_not_count_pods_on_untolerated_nodes():
    full = ExistingNode("tainted-node", {L.ZONE: "zone-b"}, {}, taints=(TAINT,),
                        pods=tuple(pod(f"old-{i}", labels=WEB) for i in range(3)))
    both = [pool(reqs=[Requirement.in_(L.ZONE, "zone-a", "zone-b")])]
    honored = run(web(4, honor_taints=True), both, existing=[full], check=False)
    assert zone_counts(honored) == {"zone-a": 2, "zone-b": 2}
    ignored = run(web(4), both, existing=[full], check=False)
    assert zone_counts(ignored) == {"zone-a": 4}


def test_affinity_ignored_counts_domains_of_nodes_the_pod_does_not_select():
    other = ExistingNode("other-team", {L.ZONE: "zone-b", "team": "other"}, {})
    pools = [pool(reqs=[Requirement.in_(L.ZONE, "zone-a")], labels={"team": "web"})]
    select = (Requirements.from_labels({"team": "web"}),)
    honored = run(web(4, requirements=select), pools, existing=[other])
    assert zone_counts(honored) == {"zone-a": 4}
    ignored = run(web(4, requirements=select, honor_affinity=False), pools, existing=[other])
    assert zone_counts(ignored) == {"zone-a": 1}
    assert len(ignored.unschedulable) == 3


def test_daemonsets_selecting_registered_or_initialized_nodes_count_as_overhead():
    daemons = [
        pod("ds-init", cpu=1000, mem_mib=0, requirements=(Requirements([Requirement.in_(L.NODE_INITIALIZED, "true")]),)),
        pod("ds-reg", cpu=1000, mem_mib=0, requirements=(Requirements([Requirement.in_(L.REGISTERED, "true")]),)),
        pod("ds-other", cpu=1000, mem_mib=0, requirements=(Requirements([Requirement.in_("team", "other")]),)),
    ]
    result = run([pod("app", cpu=3000, mem_mib=GIB // 2**20)], [pool()], daemonsets=daemons)
    claim = result.claims[0]
    # 3 cpu + 2 cpu of the two lifecycle DaemonSets (not the third): the 4-cpu type is too small
    assert [t.name for t in claim.instance_types][0] == "m5.2xlarge"
    assert L.NODE_INITIALIZED not in claim.labels and L.REGISTERED not in claim.labels
    assert L.NODE_INITIALIZED not in claim.requirements and L.REGISTERED not in claim.requirements
