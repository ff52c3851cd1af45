"""Instance indexes shared between batches (`IndexCache`): the same answers as indexes built per batch."""

from __future__ import annotations

from dataclasses import replace

from sched_factories import itype, pods, pool, spread

from carpool import labels as L
from carpool.requirements import Requirement
from carpool.scheduling.indexcache import IndexCache
from carpool.scheduling.scheduler import ScheduleOptions, schedule


def _types():
    """General, compute- and memory-optimized types: which is cheapest per pod depends on the batch's shape."""
    return ([itype(f"m5.{s}", c, c * 4) for s, c in (("large", 2), ("xlarge", 4), ("2xlarge", 8))]
            + [itype(f"c5.{s}", c, c * 2) for s, c in (("large", 2), ("xlarge", 4), ("2xlarge", 8))]
            + [itype(f"r5.{s}", c, c * 8) for s, c in (("large", 2), ("xlarge", 4), ("2xlarge", 8))])


def _batches():
    """Batches of different workload shapes, and one scheduled without efficiency ranking in between."""
    tolerant, plain = ScheduleOptions(), ScheduleOptions(efficiency_tolerance=None)
    return [
        (pods("cpu", 12, cpu=1000, mem_mib=512), tolerant),
        (pods("mem", 12, cpu=250, mem_mib=6144), tolerant),
        (pods("any", 12, cpu=1000, mem_mib=1024), plain),
        (pods("spread", 9, cpu=500, labels={"app": "s"}, spread=(spread(L.ZONE, app="s"),)), tolerant),
        (pods("cpu", 12, cpu=1000, mem_mib=512), tolerant),
    ]


def _answer(result):
    return ([(c.name, c.pool, c.pods, c.instance_types, c.zone, c.capacity_type) for c in result.claims],
            result.placements, result.unschedulable)


def test_batches_sharing_indexes_answer_as_batches_building_their_own() -> None:
    pools = [pool("general", _types()),
             pool("spot", _types(), reqs=[Requirement.in_(L.CAPACITY_TYPE, L.CAPACITY_SPOT)], weight=10)]
    cache = IndexCache()
    for batch, options in _batches():
        alone = schedule(batch, pools, options=options)
        shared = schedule(batch, pools, options=options, indexes=cache)
        assert _answer(shared) == _answer(alone)
        assert alone.claims  # the batches do open claims: the indexes are asked about
    assert len(cache) == 2  # one per pool, built once for all five batches


def test_an_index_is_shared_for_the_same_types_and_requirements_only() -> None:
    spec = pool("general", _types())
    cache = IndexCache()
    first = cache.index(spec.instance_types, spec.requirements)
    assert cache.index(spec.instance_types, spec.requirements) is first
    assert cache.index(list(spec.instance_types), spec.requirements) is not first  # equal, but another list
    narrowed = replace(spec, requirements=spec.requirements.add(Requirement.in_(L.INSTANCE_FAMILY, "c5")))
    other = cache.index(spec.instance_types, narrowed.requirements)
    assert other is not first and {t.name for t in other.types} == {t.name for t in first.types}
