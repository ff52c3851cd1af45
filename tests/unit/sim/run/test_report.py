"""The HTML report: self-contained, valid, with the four charts and the decision log."""

import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from carpool.sim.run import report
from carpool.sim.run.result import (
    CapacityEntry,
    Decision,
    Instance,
    LaunchFailure,
    PodCounts,
    SimResult,
    TimelinePoint,
)

VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line", "polyline", "path", "circle"}


def sample() -> SimResult:
    timeline = [TimelinePoint(at=t, nodes={"flex": t // 60, "general": 2 if t >= 30 else 0},
                              pending_pods=max(0, 20 - t // 5), hourly_cost=0.05 * (t // 30),
                              instance_types={"m7i.large": 2})
                for t in range(0, 301, 10)]
    inst = Instance(instance_id="i-1", instance_type="m7i.large", image_id="ami-1", node_pool="general",
                    capacity_type="spot", zone="us-east-1a", max_pods=29, launched_at=10)
    return SimResult(
        scenario="flex-first <demo>", description="a & b", duration_seconds=300, wall_seconds=3.2,
        pods=PodCounts(total=20, scheduled=20), instances=[inst], launches=[inst, inst.model_copy(
            update={"instance_id": "i-2", "instance_type": "c7i-flex.large", "node_pool": "flex"})],
        launch_failures=[LaunchFailure(at=0, instance_type="c7i-flex.large", zone="us-east-1a",
                                       capacity_type="spot", error_code="InsufficientInstanceCapacity")],
        capacity_cache=[CapacityEntry(instance_type="m7i.large", image_id="ami-1", memoryMiB=7500)],
        hourly_cost=0.5, timeline=timeline,
        decisions=[Decision(at=0, source="provisioner", message="launched <1> node", data={"pool": "general"})],
    )


class _Checker(HTMLParser):
    """Fails on unbalanced tags (a cheap well-formedness check without extra dependencies)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}>, open: {self.stack[-3:]}"
        self.stack.pop()


def test_renders_valid_self_contained_html_with_four_charts():
    page = report.render(sample())
    assert page.startswith("<!DOCTYPE html>")
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.stack == []
    for chart in ("chart-nodes", "chart-pending", "chart-cost", "chart-types"):
        assert f'id="{chart}"' in page
    assert checker.tags.count("svg") == 4
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "<script" not in page
    # every chart is well-formed XML on its own
    for chunk in page.split("<svg")[1:]:
        ET.fromstring("<svg" + chunk.split("</svg>")[0] + "</svg>")


def test_escapes_text_and_includes_the_decision_log():
    page = report.render(sample())
    assert "flex-first &lt;demo&gt;" in page and "a &amp; b" in page
    assert "launched &lt;1&gt; node" in page
    assert "InsufficientInstanceCapacity" in page
    assert "Nodes per pool" in page and "flex" in page and "general" in page


def test_empty_result_still_renders():
    page = report.render(SimResult(scenario="empty", duration_seconds=0))
    assert page.count("<svg") == 4


def test_nice_axis_maximum():
    assert [report._nice_max(v) for v in (0, 0.3, 1, 7, 11, 240, 1001)] == [1.0, 0.5, 1, 10, 20, 250, 2000]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (apt-get install -y chromium)")
def test_headless_chromium_screenshot_is_not_empty(tmp_path: Path):
    page = tmp_path / "report.html"
    report.write(sample(), str(page))
    shot = tmp_path / "shot.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,1600",
                    page.as_uri()], check=True, timeout=120, capture_output=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000  # a blank page compresses to a few hundred bytes


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (apt-get install -y chromium)")
def test_headless_chromium_parses_every_chart_and_the_decision_log(tmp_path: Path):
    """Chromium's own DOM of the page: the four charts are SVG elements with drawn content, nothing lost
    to a markup error (an unclosed tag would swallow what follows)."""
    page = tmp_path / "report.html"
    report.write(sample(), str(page))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         check=True, timeout=120, capture_output=True, text=True).stdout
    for chart in ("chart-nodes", "chart-pending", "chart-cost", "chart-types"):
        start = dom.index(f'<svg id="{chart}"')
        body = dom[start:dom.index("</svg>", start)]
        assert "<path" in body or "<rect" in body or "<polyline" in body, chart
    assert dom.rstrip().endswith("</html>")
    assert "<h2>Decision log (1)</h2>" in dom
    assert "launched &lt;1&gt; node" in dom  # the decision's text, escaped, after the charts
