"""The pieces behind the instance index and the batch-wide caches of the solver.

Resource ladders, equal pods grouped whether or not they share field objects, node-affinity profiles
shared by equal variants only, the listed options of a claim, and the quick process exit of the CLI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sched_factories import itype, pod, pods, standard_types

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.bitmask import bits, lowest_bit
from carpool.scheduling.efficiency import EfficiencyRanking
from carpool.scheduling.inputs import PodSpec, PoolSpec
from carpool.scheduling.ladder import ResourceLadder
from carpool.scheduling.options import InstanceIndex
from carpool.scheduling.podgroups import group_pods
from carpool.scheduling.preferences import Preferences, ProfileIds
from carpool.scheduling.scheduler import ScheduleOptions, schedule
from carpool.scheduling.typelabels import TypeLabels

ROOT = Path(__file__).resolve().parents[3]


def test_ladder_masks_and_maximum_match_a_scan_of_the_types():
    per_type = [4, 1, 4, 8, 2, 0, 8]
    ladder = ResourceLadder(per_type)
    everything = (1 << len(per_type)) - 1
    for amount in range(-1, 10):
        assert list(bits(ladder.at_least(amount))) == [i for i, x in enumerate(per_type) if x >= amount]
        assert list(bits(ladder.at_most(amount, everything))) == [i for i, x in enumerate(per_type) if x <= amount]
    for mask in range(everything + 1):
        want = max((per_type[i] for i in bits(mask)), default=0)
        assert ladder.maximum(mask) == want
        assert ladder.maximum(mask) == want  # the cached answer is the same


def test_lowest_bit_is_the_first_set_index():
    assert lowest_bit(0b10100) == 2
    assert list(bits(0)) == []


def test_type_labels_span_the_values_of_the_types_in_a_mask():
    types = [itype("m5.large", 2, 8), itype("m5.xlarge", 4, 16), itype("c5.large", 2, 4, arch="arm64")]
    labels = TypeLabels(types)
    assert labels.distinct_values(0b111, L.INSTANCE_TYPE, 10) == 3
    assert labels.distinct_values(0b111, L.INSTANCE_TYPE, 2) == 2  # counting stops at `enough`
    assert labels.key_mask(L.ARCH, Requirement.in_(L.ARCH, "arm64")) == 0b100
    assert labels.domains(L.ARCH, 0b011, Requirements()) == frozenset({"amd64"})


def test_efficiency_without_a_shape_keeps_every_option_and_with_one_prefers_the_cheap_unit():
    # the same price: 8 GiB per vCPU serves a memory-heavy workload at a quarter of the compute type's cost
    types = [itype("c5.xlarge", 4, 8, price=1.0), itype("r5.large", 2, 16, price=1.0)]
    index = InstanceIndex(types, Requirements())
    ranking = EfficiencyRanking(index.types, index.prices)
    assert ranking.efficient(index.everything, 0.0) == index.everything
    ranking.set_shape(8.0)
    assert index.names(ranking.efficient(index.everything, 0.0)) == ["r5.large"]
    ranking.set_shape(1.0)
    assert index.names(ranking.efficient(index.everything, 0.0)) == ["c5.xlarge"]
    assert index.names(ranking.efficient(index.everything, 0.0, 8.0)) == ["r5.large"]  # an explicit shape
    assert index.efficient(index.everything, 0.0) == index.everything  # the index's own ranking has no shape


def test_equal_pods_group_together_whether_or_not_they_share_field_objects():
    arm = (Requirements.from_labels({L.ARCH: "amd64"}),)
    sharing = [pod(f"a-{i}", requirements=arm) for i in range(3)]  # replicas share the tuple object
    rebuilt = [pod(f"b-{i}", requirements=(Requirements.from_labels({L.ARCH: "amd64"}),)) for i in range(2)]
    other = [pod(f"c-{i}", requirements=(Requirements.from_labels({L.ARCH: "arm64"}),)) for i in range(2)]
    plain = pods("d", 2)
    groups, _ = group_pods([*sharing, *other, *rebuilt, *plain])
    by_first = {g.keys[0]: g.keys for g in groups}
    assert by_first == {
        "default/a-0": ["default/a-0", "default/a-1", "default/a-2", "default/b-0", "default/b-1"],
        "default/c-0": ["default/c-0", "default/c-1"],
        "default/d-0": ["default/d-0", "default/d-1"],
    }


def test_equal_terms_and_tolerations_share_a_profile_and_different_ones_do_not():
    profiles = ProfileIds()
    arm = (Requirements.from_labels({L.ARCH: "arm64"}),)
    a = Preferences(PodSpec("default/a", {"cpu": 1}, requirements=arm), False, profiles).current
    b = Preferences(PodSpec("default/b", {"cpu": 1}, requirements=(Requirements.from_labels({L.ARCH: "arm64"}),)),
                    False, profiles).current
    c = Preferences(PodSpec("default/c", {"cpu": 1}), False, profiles).current
    alone = Preferences(PodSpec("default/d", {"cpu": 1}, requirements=arm), False).current
    assert a.id != b.id and a.profile == b.profile
    assert c.profile != a.profile
    assert alone.profile not in (a.profile, c.profile)


def test_claims_list_their_cheapest_options_up_to_the_limit():
    types = standard_types()
    batch = pods("p", 6, cpu=500, mem_mib=256)
    full = schedule(batch, [PoolSpec("default", types)])
    capped = schedule(batch, [PoolSpec("default", types)], options=ScheduleOptions(max_instance_types=1))
    for claim, one in zip(full.claims, capped.claims, strict=True):
        prices = [c.price for c in claim.instance_types]
        assert prices == sorted(prices) and len(prices) == claim.option_count
        assert one.instance_types == claim.instance_types[:1]
        assert one.option_count == claim.option_count


def test_the_console_entry_point_exits_with_the_command_code(tmp_path):
    missing = tmp_path / "nope.yaml"
    code = "from carpool.cli import main; main()"
    env_path = f"{ROOT / 'shared'}:{ROOT}"
    done = subprocess.run([sys.executable, "-c", code, "plan", "-m", str(missing), "--json"],
                          capture_output=True, text=True, env={"PYTHONPATH": env_path}, cwd=ROOT)
    assert done.returncode == 2
    assert "file not found" in done.stderr
    manifests = tmp_path / "pool.yaml"
    manifests.write_text((ROOT / "bench" / "stages.py").read_text().split('MANIFESTS = """\\\n')[1].split('"""')[0])
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                        "  - {name: c, image: x, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n")
    done = subprocess.run([sys.executable, "-c", code, "plan", "-m", str(manifests), "-p", str(pod_file), "--json"],
                          capture_output=True, text=True, env={"PYTHONPATH": env_path}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert '"nodeClaims"' in done.stdout and done.stdout.rstrip().endswith("}")

