"""`carpool simulate --report FILE.html`: one self-contained page about a run.

Everything is inline (SVG drawn here, CSS in a <style> tag, no script, no CDN) so the file can be attached
to a bug report or opened offline years later. Four charts answer the questions people ask of an autoscaler:
how many nodes of which pool, how long pods waited, what it cost, and which instance types it chose; the
time-to-capacity table says where the waiting went, and the decision log below them says why.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from carpool.sim.run.result import SimResult

PALETTE = ("#2563eb", "#f97316", "#16a34a", "#dc2626", "#9333ea", "#0891b2", "#ca8a04", "#db2777", "#4b5563")
_W, _H = 640, 240
_L, _R, _T, _B = 56, 150, 28, 36  # margins: left axis, right legend, title, bottom axis

Point = tuple[float, float]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _nice_max(value: float) -> float:
    """A round axis maximum at or above `value` (1, 2, 2.5, 5 x 10^n)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10 if value >= 1 else 0.1
    while magnitude > value:
        magnitude /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.2f}"


def line_chart(chart_id: str, title: str, series: Mapping[str, Sequence[Point]], y_label: str,
               step: bool = True) -> str:
    """A step (or straight) line chart of several series over simulated seconds, as an SVG element."""
    xs = [x for pts in series.values() for x, _ in pts] or [0.0]
    ys = [y for pts in series.values() for _, y in pts] or [0.0]
    x_max = max(max(xs), 1.0)
    y_max = _nice_max(max(ys))
    pw, ph = _W - _L - _R, _H - _T - _B

    def sx(x: float) -> float:
        return _L + pw * x / x_max

    def sy(y: float) -> float:
        return _T + ph - ph * y / y_max

    parts = [f'<svg id="{_e(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" aria-label="{_e(title)}">',
             f'<title>{_e(title)}</title>',
             f'<text x="{_L}" y="18" class="t">{_e(title)}</text>']
    for i in range(5):
        y = y_max * i / 4
        parts.append(f'<line x1="{_L}" y1="{sy(y):.1f}" x2="{_L + pw}" y2="{sy(y):.1f}" class="grid"/>')
        parts.append(f'<text x="{_L - 6}" y="{sy(y) + 4:.1f}" class="ax" text-anchor="end">{_e(_fmt(y))}</text>')
    for i in range(5):
        x = x_max * i / 4
        parts.append(f'<text x="{sx(x):.1f}" y="{_H - _B + 16}" class="ax" text-anchor="middle">{_e(_fmt(x))}s</text>')
    parts.append(f'<text x="12" y="{_T + ph / 2:.1f}" class="ax" transform="rotate(-90 12 {_T + ph / 2:.1f})" '
                 f'text-anchor="middle">{_e(y_label)}</text>')
    for n, (name, pts) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{_path(pts, sx, sy, step)}"/>')
        ly = _T + 14 + 16 * n
        parts.append(f'<rect x="{_W - _R + 12}" y="{ly - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{_W - _R + 26}" y="{ly}" class="lg">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _path(pts: Sequence[Point], fx: Callable[[float], float], fy: Callable[[float], float], step: bool) -> str:
    out: list[str] = []
    prev: Point | None = None
    for x, y in pts:
        if step and prev is not None:
            out.append(f"{fx(x):.1f},{fy(prev[1]):.1f}")
        out.append(f"{fx(x):.1f},{fy(y):.1f}")
        prev = (x, y)
    return " ".join(out)


def bar_chart(chart_id: str, title: str, items: Sequence[tuple[str, float]]) -> str:
    """Horizontal bars, largest first."""
    rows = sorted(items, key=lambda kv: (-kv[1], kv[0]))[:16] or [("none", 0.0)]
    height = _T + 22 * len(rows) + 12
    v_max = max(v for _, v in rows) or 1.0
    label_w, bar_w = 150, _W - 150 - 60
    parts = [f'<svg id="{_e(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {_W} {height}" width="{_W}" height="{height}" role="img" aria-label="{_e(title)}">',
             f'<title>{_e(title)}</title>', f'<text x="8" y="18" class="t">{_e(title)}</text>']
    for i, (label, value) in enumerate(rows):
        y = _T + 22 * i
        w = bar_w * value / v_max
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" class="ax" text-anchor="end">{_e(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="15" fill="{PALETTE[i % len(PALETTE)]}"/>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 14}" class="ax">{_e(_fmt(value))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _series_nodes(result: SimResult) -> dict[str, list[Point]]:
    pools = sorted({p for t in result.timeline for p in t.nodes})
    return {p: [(t.at, float(t.nodes.get(p, 0))) for t in result.timeline] for p in pools} or {"nodes": []}


def _table(headers: Iterable[str], rows: Iterable[Iterable[object]], css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111827;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.kpis{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}.kpi{border:1px solid #e5e7eb;border-radius:8px;padding:8px 14px}
.kpi b{display:block;font-size:20px}.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(640px,1fr));gap:16px}
svg.chart{border:1px solid #e5e7eb;border-radius:8px;background:#fff;max-width:100%;height:auto}
.t{font-size:14px;font-weight:600;fill:#111827}.ax{font-size:11px;fill:#4b5563}.lg{font-size:12px;fill:#111827}
.grid{stroke:#e5e7eb;stroke-width:1}table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f9fafb;position:sticky;top:0}td.num{text-align:right}.lvl-WARNING,.lvl-ERROR{color:#b91c1c}
.muted{color:#6b7280}
"""


def render(result: SimResult) -> str:
    """The whole HTML page."""
    tl = result.timeline
    charts = [
        line_chart("chart-nodes", "Nodes per pool", _series_nodes(result), "nodes"),
        line_chart("chart-pending", "Pending pods", {"pending": [(t.at, float(t.pending_pods)) for t in tl]}, "pods"),
        line_chart("chart-cost", "Hourly cost (USD)", {"cost": [(t.at, t.hourly_cost) for t in tl]}, "USD / hour"),
        bar_chart("chart-types", "Instance types launched",
                  list(Counter(i.instance_type for i in result.launches).items())),
    ]
    kpis = [("pods scheduled", f"{result.pods.scheduled}/{result.pods.total}"),
            ("nodes running", len(result.instances)), ("launches", len(result.launches)),
            ("capacity errors", len(result.launch_failures)), ("hourly cost", f"${result.hourly_cost:.3f}"),
            ("slowest pod", f"{result.pods.max_unbound_seconds:.0f}s"), ("wall time", f"{result.wall_seconds:.1f}s"),
            ("carpool's own AWS cost", f"${result.own_cost.monthly_usd:.2f}/month")]
    decisions = _table(["t (s)", "source", "level", "message", "details"],
                       ([f"{d.at:.0f}", d.source, d.level, d.message, _details(d.data)] for d in result.decisions),
                       "decisions")
    instances = _table(["instance", "type", "pool", "capacity", "zone", "AMI", "max pods", "launched", "terminated"],
                       ([i.instance_id, i.instance_type, i.node_pool, i.capacity_type, i.zone, i.image_id,
                         i.max_pods if i.max_pods is not None else "", f"{i.launched_at:.0f}s",
                         f"{i.terminated_at:.0f}s" if i.terminated_at is not None else ""] for i in result.launches))
    failures = _table(["t (s)", "type", "zone", "capacity", "error"],
                      ([f"{f.at:.0f}", f.instance_type, f.zone, f.capacity_type, f.error_code]
                       for f in result.launch_failures))
    cache = _table(["type", "AMI", "memory (MiB)", "samples"],
                   ([c.instance_type, c.image_id, c.memory_mi_b, c.samples] for c in result.capacity_cache))
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>carpool simulation: {_e(result.scenario)}</title><style>{_CSS}</style></head><body>",
        f"<h1>carpool simulation: {_e(result.scenario)}</h1>",
        f'<p class="muted">{_e(result.description)} {result.duration_seconds:.0f} simulated seconds.</p>',
        '<div class="kpis">' + "".join(f'<div class="kpi"><b>{_e(v)}</b>{_e(k)}</div>' for k, v in kpis) + "</div>",
        '<h2>Charts</h2><div class="charts">' + "".join(charts) + "</div>",
        f"<h2>Time to capacity ({result.time_to_capacity.pods} pods waited)</h2>", _time_to_capacity(result),
        f"<h2>carpool's own AWS cost (${result.own_cost.monthly_usd:.2f} a month at this run's rate)</h2>",
        _own_cost(result),
        f"<h2>Instances ({len(result.launches)})</h2>", instances,
        f"<h2>Capacity errors ({len(result.launch_failures)})</h2>", failures,
        f"<h2>Learned capacity ({len(result.capacity_cache)})</h2>", cache,
        f"<h2>Decision log ({len(result.decisions)})</h2>", decisions,
        "</body></html>\n",
    ])


def _time_to_capacity(result: SimResult) -> str:
    """Each step of a pending pod's way to a node: pods, p50, p99 and max in simulated seconds."""
    ttc = result.time_to_capacity
    steps = _table(["step", "pods", "p50 (s)", "p99 (s)", "max (s)"],
                   ([label, d.count, f"{d.p50:g}", f"{d.p99:g}", f"{d.max:g}"] for label, d in ttc.steps()),
                   "time-to-capacity")
    return steps + (f'<p class="muted">From the kube-scheduler marking a pod Unschedulable to its binding; the '
                    f"launch steps count the {ttc.through_new_nodes} pods that went to a node launched while they "
                    "waited. carpool's overhead is the wait less EC2's boot (CreateFleet -> Node) and the "
                    "kubelet's registration (Node -> Ready).</p>")


def _own_cost(result: SimResult) -> str:
    """Per service, then the Lambda share per function, then the monthly quantities priced."""
    cost = result.own_cost
    services = _table(["service", "USD / month"], ([k, f"{v:.2f}"] for k, v in cost.services.items()), "own-cost")
    functions = _table(["function", "Lambda USD / month"],
                       ([k, f"{v:.2f}"] for k, v in cost.lambda_by_function.items()), "own-cost")
    quantities = ", ".join(f"{k} {v:,.0f}" if v >= 10 else f"{k} {v:.3f}" for k, v in cost.quantities.items())
    return (services + functions + f'<p class="muted">Monthly quantities: {_e(quantities)}. AWS list prices '
            "(us-east-1), no free tier; scheduled functions at their deployed schedule (every minute).</p>")


def _details(data: dict[str, object]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in data.items())
    return text if len(text) <= 300 else text[:297] + "..."


def write(result: SimResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(result))
