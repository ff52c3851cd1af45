"""Lower bounds on what a plan can cost, to judge the scheduler's packing.

- `simple_bound` (the cost yardstick users compare against): max(total cpu x cheapest $ per allocatable vCPU, total memory x
  cheapest $ per allocatable GiB). Loose on real catalogs: a 2-vCPU t4g.nano with 15 MiB of allocatable
  memory sets the cpu rate, and no node holds cpu without memory.
- `lp_bound`: the fractional relaxation "buy any real-valued amount of each instance type so total cpu and
  total memory are covered" (a valid lower bound for every integral plan). Solved through its dual,
  max C*a + M*b subject to a*cpu_t + b*mem_t <= price_t, a concave problem in one variable (golden
  section over a, with b the largest feasible value for that a).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from carpool.scheduling.inputs import InstanceOption, PodSpec

GIB = 2**30


def _rates(types: Iterable[InstanceOption]) -> list[tuple[float, float, float]]:
    """(price, vCPU, GiB) of every type with an available offering (cheapest such offering)."""
    out = []
    for it in types:
        prices = [o.price for o in it.offerings if o.available]
        cpu = it.allocatable.get("cpu", 0) / 1000
        mem = it.allocatable.get("memory", 0) / GIB
        if prices and (cpu > 0 or mem > 0):
            out.append((min(prices), cpu, mem))
    return out


def totals(pods: Iterable[PodSpec], placed: set[str] | None = None) -> tuple[float, float]:
    cpu = mem = 0.0
    for p in pods:
        if placed is None or p.key in placed:
            cpu += p.requests.get("cpu", 0) / 1000
            mem += p.requests.get("memory", 0) / GIB
    return cpu, mem


def simple_bound(cpu: float, mem: float, types: Sequence[InstanceOption]) -> float:
    rates = _rates(types)
    per_cpu = min(p / c for p, c, _ in rates if c > 0)
    per_gib = min(p / m for p, _, m in rates if m > 0)
    return max(cpu * per_cpu, mem * per_gib)


def lp_bound(cpu: float, mem: float, types: Sequence[InstanceOption]) -> float:
    rates = _rates(types)
    if not rates:
        return 0.0
    a_max = min((p / c for p, c, _ in rates if c > 0), default=0.0)

    def value(a: float) -> float:
        b = min((p - a * c) / m for p, c, m in rates if m > 0)
        return cpu * a + mem * max(b, 0.0)

    lo, hi = 0.0, a_max
    ratio = (5**0.5 - 1) / 2
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = value(x1), value(x2)
    for _ in range(80):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = value(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = value(x1)
    return max(f1, f2, value(0.0), value(a_max))
