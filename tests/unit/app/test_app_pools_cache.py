"""`pools.prepare` keeps what depends only on the pool's requirements, the catalog and the AMIs per process:
the answers must be exactly those of a computation from scratch, and a changed NodePool, catalog or AMI
set must never be served an earlier answer."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from carpool.amis import map_instance_types, node_os
from carpool.amis.offline import placeholder_amis
from carpool.api.loader import Manifests, load
from carpool.app import pools
from carpool.catalog import Catalog
from carpool.requirements import Requirement, Requirements
from carpool.state.models import CapacityRecord

CATALOG = Catalog.snapshot()

MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: nc}}
      requirements:
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [{families}]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: nc}}
spec:
  role: node
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
{kubelet}
"""


def manifests(families: str, alias: str = "al2023@latest", kubelet: str = "") -> Manifests:
    return load(MANIFESTS.format(families=families, alias=alias, kubelet=kubelet))


def prepare(m: Manifests, catalog: Catalog = CATALOG, resolve=placeholder_amis) -> pools.Prepared:
    return pools.prepare(m, catalog, resolve, {}, {}, set(), {})


def from_scratch(m: Manifests, catalog: Catalog) -> dict[str, str]:
    """Type -> AMI id, computed without any cache: every catalog type tested against the pool."""
    [pool], [nodeclass] = m.nodepools, m.nodeclasses
    family, reqs = nodeclass.ami_family(), pool.requirements()
    admitted = [node_os.for_family(it, family) for it in catalog.types.values() if node_os.compatible(it, family)]
    admitted = [it for it in admitted if it.requirements.intersects(reqs) is None]
    return {name: ami.id for name, ami in map_instance_types(placeholder_amis(nodeclass), admitted).items()}


def offered(p: pools.Prepared) -> dict[str, str]:
    ctx = p.contexts["p"]
    return {name: ami.id for name, ami in ctx.amis.items()}


def test_a_second_preparation_gives_the_same_answer_from_the_cache() -> None:
    m = manifests("c7i, m7g")
    first, second = prepare(m), prepare(manifests("c7i, m7g"))  # equal content, new objects
    assert offered(first) == offered(second) == from_scratch(m, CATALOG)
    assert offered(first)  # c7i and m7g types exist in the snapshot
    assert [o.name for o in first.specs[0].instance_types] == [o.name for o in second.specs[0].instance_types]
    reqs = m.nodepools[0].requirements()
    assert pools.admitted_types(CATALOG, reqs, "al2023") is pools.admitted_types(
        CATALOG, manifests("c7i, m7g").nodepools[0].requirements(), "al2023")


def test_a_changed_nodepool_is_not_served_the_earlier_answer() -> None:
    prepare(manifests("c7i"))
    m = manifests("m7g")
    got = offered(prepare(m))
    assert got == from_scratch(m, CATALOG)
    assert got and all(name.startswith("m7g.") for name in got)


def test_value_order_is_part_of_the_key() -> None:
    a = Requirements([Requirement.in_("karpenter.k8s.aws/instance-family", "c7i", "m7g")])
    b = Requirements([Requirement.in_("karpenter.k8s.aws/instance-family", "m7g", "c7i")])
    assert pools.requirements_key(a) != pools.requirements_key(b)
    assert [it.name for it in pools.admitted_types(CATALOG, a, None)] == [
        it.name for it in pools.admitted_types(CATALOG, b, None)]


def test_a_refreshed_catalog_is_not_served_the_earlier_answer() -> None:
    m = manifests("c7i")
    before = offered(prepare(m))
    kept = {name: it for name, it in CATALOG.types.items() if not name.startswith("c7i.")}
    kept["c7i.large"] = CATALOG.types["c7i.large"]
    refreshed = Catalog(CATALOG.region, kept)
    after = offered(prepare(m, refreshed))
    assert len(before) > 1
    assert after == from_scratch(m, refreshed) == {"c7i.large": before["c7i.large"]}


def test_changed_amis_are_not_served_the_earlier_mapping_and_the_objects_are_this_calls() -> None:
    m = manifests("c7i, m7g")
    prepare(m)
    arm_only = lambda nc: [a for a in placeholder_amis(nc) if a.arch == "arm64"]  # noqa: E731
    got = prepare(m, resolve=arm_only).contexts["p"].amis
    assert got and all(name.startswith("m7g.") for name in got)
    relabelled = lambda nc: [replace(a, source="another selector") for a in placeholder_amis(nc)]  # noqa: E731
    again = prepare(m, resolve=relabelled).contexts["p"].amis
    assert {n: a.id for n, a in again.items()} == from_scratch(m, CATALOG)
    assert {a.source for a in again.values()} == {"another selector"}


def test_windows_families_see_windows_labels() -> None:
    m = manifests("c7i", alias="windows2022@latest")
    got = prepare(m)
    assert offered(got) == from_scratch(m, CATALOG)
    assert all(it.labels.get("kubernetes.io/os") == "windows" for it in got.contexts["p"].types.values())


def test_the_table_is_bounded() -> None:
    for i in range(pools._Admitted.MAX_ENTRIES + 10):
        pools.admitted_types(CATALOG, Requirements([Requirement.in_("karpenter.k8s.aws/instance-cpu", str(i))]), None)
    table = pools._Admitted.of(CATALOG)._admitted
    assert len(table) == pools._Admitted.MAX_ENTRIES


def test_offered_resources_match_a_scan_of_the_catalog() -> None:
    [pool] = manifests("g5").nodepools
    assert "nvidia.com/gpu" in pools.offered_resources(pool, CATALOG)
    [cpu_pool] = manifests("c7i").nodepools
    assert "nvidia.com/gpu" not in pools.offered_resources(cpu_pool, CATALOG)


def learned_record(type_name: str, image_id: str, memory_mib: int) -> CapacityRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return CapacityRecord(instance_type=type_name, image_id=image_id, ami_family="al2023",
                          capacity={"memory": memory_mib * 2**20}, first_seen=now, last_seen=now, expires_at=now)


def test_learned_capacity_is_not_served_an_earlier_size() -> None:
    m = manifests("c7i")
    plain = prepare(m)
    image = plain.contexts["p"].amis["c7i.large"].id
    raw = CATALOG.types["c7i.large"].memory_mib
    learned = {("c7i.large", image): learned_record("c7i.large", image, raw - 300)}
    got = pools.prepare(m, CATALOG, placeholder_amis, {}, learned, set(), {})
    assert got.capacity_sources["p"]["c7i.large"] == "learned"
    assert got.contexts["p"].sizes["c7i.large"].capacity["memory"] == (raw - 300) * 2**20
    assert plain.capacity_sources["p"]["c7i.large"] == "default"
    lower = {("c7i.large", image): learned_record("c7i.large", image, raw - 400)}
    again = pools.prepare(m, CATALOG, placeholder_amis, {}, lower, set(), {})
    assert again.contexts["p"].sizes["c7i.large"].capacity["memory"] == (raw - 400) * 2**20
    assert prepare(m).contexts["p"].sizes["c7i.large"] == plain.contexts["p"].sizes["c7i.large"]


def test_network_and_kubelet_settings_are_part_of_the_key() -> None:
    m = manifests("c7i")
    before = prepare(m).contexts["p"].sizes["c7i.large"].max_pods
    prefix = pools.prepare(m, CATALOG, placeholder_amis, {"ENABLE_PREFIX_DELEGATION": "true"}, {}, set(), {})
    assert prefix.contexts["p"].sizes["c7i.large"].max_pods > before
    capped = manifests("c7i", kubelet="  kubelet: {maxPods: 7}")
    assert prepare(capped).contexts["p"].sizes["c7i.large"].max_pods == 7
    assert prepare(m).contexts["p"].sizes["c7i.large"].max_pods == before


def test_unavailable_offerings_and_zones_are_applied_on_every_call() -> None:
    m = manifests("c7i")
    prepare(m)
    gone = {("c7i.large", o.zone, o.capacity_type) for o in CATALOG.types["c7i.large"].offerings}
    got = pools.prepare(m, CATALOG, placeholder_amis, {}, {}, gone, {})
    [option] = [o for o in got.specs[0].instance_types if o.name == "c7i.large"]
    assert option.offerings and not any(o.available for o in option.offerings)
    fresh = prepare(m)
    [option] = [o for o in fresh.specs[0].instance_types if o.name == "c7i.large"]
    assert any(o.available for o in option.offerings)
