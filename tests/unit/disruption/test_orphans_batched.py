"""The instances of a batched CreateFleet carry their request's claims (`fleet.FLEET_CLAIMS_TAG`); the
clean-up rules pair them with their claims as the launch did (`fleet.distribute`), repair the claims,
and never release a claim while an instance launched for it runs (issue 30, item 1)."""

from __future__ import annotations

from typing import Any

from test_orphans import claim, decide, ec2_instance, node

from carpool.disruption import orphans
from carpool.launch import fleet
from carpool.state.models import ClaimStatus

CLAIMS = ["default-aa01", "default-bb02", "default-cc03", "default-dd04"]
IDS = ["i-04", "i-01", "i-03", "i-02"]


def batched(iid: str, claims: list[str] = CLAIMS) -> orphans.InstanceView:
    raw: dict[str, Any] = ec2_instance(iid, claim=None)
    raw["Tags"].append({"Key": fleet.FLEET_CLAIMS_TAG, "Value": fleet.fleet_claims_value("default", claims)})
    return orphans.InstanceView.from_ec2(raw)


def reserved() -> list[Any]:
    return [claim(name, pods=1) for name in CLAIMS]


def test_the_tag_names_the_claims_without_their_shared_prefix_and_reads_back() -> None:
    value = fleet.fleet_claims_value("default", list(reversed(CLAIMS)))
    assert value == "aa01 bb02 cc03 dd04"
    assert fleet.fleet_claims("default", value) == CLAIMS


def test_batches_fit_their_claims_in_one_tag_value() -> None:
    names = [f"a-long-nodepool-name-{i:010x}" for i in range(60)]
    cut = fleet.batches("a-long-nodepool-name", names)
    assert [n for b in cut for n in b] == names and len(cut) > 1
    assert all(len(fleet.fleet_claims_value("a-long-nodepool-name", b)) <= fleet.MAX_TAG_VALUE for b in cut)
    assert fleet.batches("default", CLAIMS) == [CLAIMS]


def test_the_pairing_from_tags_is_the_launchs_pairing() -> None:
    launched = fleet.FleetOutcome([fleet.FleetInstance(i, "m5.large", "us-east-1a", None) for i in IDS], [], [])
    given, extra = fleet.distribute(launched, CLAIMS)
    views = [batched(i) for i in IDS]
    assert fleet.claims_of_instances((v.instance_id, v.tags) for v in views) == {i: c for c, (i, *_) in given.items()}
    assert extra == []


def test_an_instance_named_by_its_claim_tag_keeps_it_and_the_rest_pair_around_it() -> None:
    views = [(i, dict(batched(i).tags)) for i in IDS]
    views[0][1]["karpenter.sh/nodeclaim"] = "default-cc03"  # i-04, tagged by the registrar
    paired = fleet.claims_of_instances(views)
    assert paired == {"i-04": "default-cc03", "i-01": "default-aa01", "i-02": "default-bb02", "i-03": "default-dd04"}


def test_slow_booting_batch_instances_repair_their_claims_instead_of_releasing_them() -> None:
    """Past the launch deadline, no node joined yet (slow boots): each claim learns its instance."""
    out = decide([batched(i) for i in IDS], reserved(), [], at=200)
    assert out.releases == [] and out.terminations == [] and out.adoptions == []
    assert sorted((r.claim.name, r.instance.instance_id) for r in out.repairs) == [
        ("default-aa01", "i-01"), ("default-bb02", "i-02"), ("default-cc03", "i-03"), ("default-dd04", "i-04")]
    assert all(r.claim.status == ClaimStatus.LAUNCHED for r in out.repairs)


def test_before_the_deadline_they_wait_and_nothing_is_released() -> None:
    out = decide([batched(i) for i in IDS], reserved(), [], at=100)
    assert out.releases == [] and out.repairs == [] and set(out.waiting) == set(IDS)


def test_a_claim_the_fleet_had_no_instance_for_is_released_at_the_deadline() -> None:
    out = decide([batched(i) for i in IDS[:3]], reserved(), [], at=200)
    assert [r.claim.name for r in out.releases] == ["default-dd04"]
    assert len(out.repairs) == 3


def test_a_joined_node_repairs_its_claim_at_once() -> None:
    out = decide([batched("i-01")], reserved()[:1], [node("i-01")], at=50)
    assert [(r.claim.name, r.instance.instance_id) for r in out.repairs] == [("default-aa01", "i-01")]
    assert out.adoptions == []


def test_a_reservation_paired_with_an_instance_another_claim_records_is_not_kept() -> None:
    """The instance was adopted under another name meanwhile: the reservation holds nothing real."""
    adopted = claim("adopted-i-01", status=ClaimStatus.REGISTERED, instance_id="i-01", pods=1)
    out = decide([batched("i-01", CLAIMS[:1])], [*reserved()[:1], adopted], [node("i-01")], at=200)
    assert [r.claim.name for r in out.releases] == ["default-aa01"]
