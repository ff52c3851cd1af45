"""carpool's own AWS cost: known usage in, known dollars out, one service at a time."""

from __future__ import annotations

import pytest

from carpool import delivery
from carpool.sim.run import own_cost
from carpool.sim.run.own_cost import FunctionUsage, Usage, monthly

HOUR = 3600.0
#: a one-hour window scales to a month 730 times
MONTH = own_cost.MONTH_HOURS


def _only(services: dict[str, float], service: str) -> float:
    others = {k: v for k, v in services.items() if k != service and v}
    assert not others, f"unexpected charges besides {service}: {others}"
    return services[service]


def test_lambda_gb_seconds_and_requests() -> None:
    # 1,000 invocations of 1 s at 1,024 MiB in an hour: 1,000 GB-s and 1,000 requests an hour
    f = FunctionUsage(memory_mib=1024)
    for _ in range(1000):
        f.add(1.0)
    cost = monthly(Usage(seconds=HOUR, functions={"provisioner": f}))
    expected = MONTH * (1000 * 0.0000133334 + 1000 * 0.20 / 1e6)
    assert cost.services["Lambda"] == pytest.approx(expected, abs=1e-3)
    assert cost.lambda_by_function["provisioner"] == pytest.approx(expected, abs=1e-3)
    assert cost.quantities["gbSeconds"] == pytest.approx(MONTH * 1000)
    # each invocation is also one trace and ~420 bytes of platform log lines
    assert cost.services["X-Ray"] == pytest.approx(MONTH * 1000 * 5.0 / 1e6, abs=1e-3)


def test_billed_duration_rounds_up_to_the_millisecond() -> None:
    assert own_cost.billed_ms(0.0) == 1
    assert own_cost.billed_ms(0.0101) == 11
    assert own_cost.billed_ms(0.010) == 10


def test_scheduled_function_is_priced_at_its_schedule_not_at_the_window_rate() -> None:
    # ten runs seen in an hour, but the schedule says one a minute: 43,800 runs a month of the mean duration
    f = FunctionUsage(memory_mib=512)
    for _ in range(10):
        f.add(50.0)
    cost = monthly(Usage(seconds=HOUR, functions={"watcher": f}, schedules={"watcher": 60.0}))
    runs = own_cost.MONTH_SECONDS / 60
    assert cost.quantities["invocations"] == pytest.approx(runs)
    assert cost.quantities["gbSeconds"] == pytest.approx(runs * 50.0 * 0.5)
    assert cost.lambda_by_function["watcher"] == pytest.approx(runs * (25 * 0.0000133334 + 0.2e-6), abs=1e-3)


def test_dynamodb_read_and_write_units() -> None:
    f = FunctionUsage(memory_mib=512, read_units=1000.0, write_units=2000.0)
    usage = Usage(seconds=HOUR, functions={"registrar": f})
    cost = monthly(usage)
    assert cost.services["DynamoDB"] == pytest.approx(MONTH * (1000 * 0.125 + 2000 * 0.625) / 1e6, abs=1e-4)


def test_eventbridge_custom_events() -> None:
    f = FunctionUsage(memory_mib=512, bus_events=10_000)
    cost = monthly(Usage(seconds=HOUR, functions={"watcher": f}))
    assert cost.services["EventBridge"] == pytest.approx(MONTH * 10_000 / 1e6, abs=1e-4)


def test_sqs_requests_include_the_mappings_idle_polling() -> None:
    idle = monthly(Usage(seconds=HOUR, polled_queues=3))
    # three mappings x five pollers x three 20-second receives a minute, all month
    polls = 3 * 5 * 3 * 60 * MONTH
    assert idle.quantities["sqsRequests"] == pytest.approx(polls)
    assert _only(idle.services, "SQS") == pytest.approx(polls * 0.40 / 1e6, abs=1e-4)
    busy = monthly(Usage(seconds=HOUR, polled_queues=3,
                         functions={"provisioner": FunctionUsage(memory_mib=2048, sqs_requests=1000)}))
    assert busy.quantities["sqsRequests"] == pytest.approx(polls + 1000 * MONTH)


def test_a_series_sent_every_hour_costs_a_month() -> None:
    cost = monthly(Usage(seconds=60.0, metric_series=20))
    assert _only(cost.services, "CloudWatch metrics") == pytest.approx(20 * 0.30)


def test_log_ingestion_per_gb() -> None:
    # one invocation an hour writing 1 GiB less Lambda's own lines: 730 GiB a month
    f = FunctionUsage(memory_mib=512)
    f.add(0.001, log_bytes=1024**3 - own_cost.PLATFORM_LOG_BYTES)
    cost = monthly(Usage(seconds=HOUR, functions={"registrar": f}))
    assert cost.quantities["logGB"] == pytest.approx(MONTH)
    assert cost.services["CloudWatch Logs"] == pytest.approx(MONTH * 0.50)


def test_every_service_has_a_line_and_the_total_adds_up() -> None:
    cost = monthly(Usage(seconds=HOUR, polled_queues=1, metric_series=1, alarm_metrics=1, dashboards=1, kms_keys=1,
                         functions={"watcher": FunctionUsage(512, 1, 1000.0, 10, 1.0, 1.0, 1, 1)}))
    assert tuple(cost.services) == own_cost.SERVICES
    assert all(v > 0 for v in cost.services.values())
    assert cost.total == pytest.approx(sum(cost.services.values()))
    assert cost.total == pytest.approx(cost.usage_total + cost.fixed)


def test_metric_series_are_billed_for_the_hours_they_receive_data() -> None:
    # a series sent every minute is there every hour; one sent once a day in 1/24 of the hours
    assert own_cost.hourly_share(60.0) == pytest.approx(1.0)
    assert own_cost.hourly_share(1 / 24) == pytest.approx(1 / 24, rel=0.03)
    assert own_cost.hourly_share(0.0) == 0.0
    # two sends an hour at random times leave about one hour in seven empty
    assert own_cost.hourly_share(2.0) == pytest.approx(1 - 0.1353, abs=1e-3)
    cost = monthly(Usage(seconds=HOUR, metric_series=1.0 + own_cost.hourly_share(1 / 24)))
    assert _only(cost.services, "CloudWatch metrics") == pytest.approx(0.30 * (1 + 1 / 24), rel=1e-3)


def test_the_stacks_fixed_monitoring_is_priced_apart_from_usage() -> None:
    # 30 alarm metrics, one dashboard, the alarm topic's key; nothing else ran
    cost = monthly(Usage(seconds=HOUR, alarm_metrics=30, dashboards=1, kms_keys=1))
    assert cost.services["CloudWatch alarms"] == pytest.approx(3.00)
    assert cost.services["CloudWatch dashboards"] == pytest.approx(3.00)
    assert cost.services["KMS"] == pytest.approx(1.00)
    assert cost.fixed == pytest.approx(7.00) and cost.usage_total == pytest.approx(0.0)
    assert cost.quantities["alarmMetrics"] == 30


def test_item_sizes_follow_dynamodb_rules() -> None:
    assert own_cost.item_size({"pk": {"S": "abc"}}) == 2 + 3
    # numbers: significant digits, two per byte, plus one
    assert own_cost.value_size({"N": "12345"}) == 4
    assert own_cost.value_size({"N": "-0.0100"}) == 2
    # maps and lists: 3 bytes plus one per element
    assert own_cost.value_size({"M": {"a": {"S": "xy"}}}) == 3 + 1 + 2 + 1
    assert own_cost.value_size({"L": [{"BOOL": True}, {"NULL": True}]}) == 3 + 2 + 2
    assert own_cost.value_size({"SS": ["a", "bc"]}) == 3
    assert own_cost.value_size({"B": b"\x00\x01"}) == 2


def test_request_units_by_size() -> None:
    assert own_cost.write_units(1024) == 1
    assert own_cost.write_units(1025) == 2
    assert own_cost.write_units(1025, transactional=True, indexes=1) == 8
    # per item for GetItem/BatchGetItem, summed for a Query; eventual reads cost half
    assert own_cost.read_units([100, 100], consistent=True) == 2
    assert own_cost.read_units([100, 100], consistent=True, summed=True) == 1
    assert own_cost.read_units([5000], consistent=False) == 1
    assert own_cost.read_units([0], transactional=True) == 2
    assert own_cost.entry_chunks(64 * 1024) == 1
    assert own_cost.entry_chunks(64 * 1024 + 1) == 2


def test_every_deployed_function_has_a_memory_size() -> None:
    assert set(delivery.MEMORY_MIB) == set(delivery.TIMEOUT_SECONDS)
    assert set(delivery.SCHEDULE_SECONDS) <= set(delivery.MEMORY_MIB)


def test_empty_window_is_refused() -> None:
    with pytest.raises(ValueError):
        monthly(Usage(seconds=0))


def test_dynamodb_requests_are_sized_by_their_items() -> None:
    from carpool.sim.run import usage

    key = {"pk": {"S": "claim#a"}, "sk": {"S": "x"}}
    item = {**key, "blob": {"S": "x" * 1500}}  # 1,516 bytes: two write units
    indexed = {**item, "gsi1pk": {"S": "claims"}}
    sizes: dict[usage.Ref, tuple[int, bool]] = {}
    # a Put of an item the index projects writes the index too
    assert usage._units("PutItem", {"TableName": "t", "Item": indexed}, {}, sizes) == (0.0, 4.0)
    # an update is charged by the larger of the item before and after (what it sets added), in a
    # transaction twice, and the index with it
    sizes[usage._ref("t", key)] = (5000, True)
    update = {"TableName": "t", "Key": key, "UpdateExpression": "SET #s = :s",
              "ExpressionAttributeNames": {"#s": "status"}, "ExpressionAttributeValues": {":s": {"S": "x" * 200}}}
    assert usage._units("TransactWriteItems", {"TransactItems": [{"Update": update}]}, {}, sizes) == (0.0, 2 * (6 + 6))
    assert sizes[usage._ref("t", key)] == (5000 + 200 + 6, True)
    # a delete is charged by the item it removes, and forgets it
    assert usage._units("DeleteItem", {"TableName": "t", "Key": key}, {}, sizes) == (0.0, 12.0)
    assert usage._ref("t", key) not in sizes
    # a Query sums its items before rounding to 4 KB; eventually consistent reads cost half; what it read
    # is remembered
    items = [item] * 4
    assert usage._units("Query", {"TableName": "t"}, {"Items": items}, sizes) == (1.0, 0.0)
    assert usage._units("Query", {"TableName": "t", "ConsistentRead": True}, {"Items": items}, sizes) == (2.0, 0.0)
    assert sizes[usage._ref("t", key)] == (1516, False)
    # a GetItem of nothing still reads one unit's worth
    assert usage._units("GetItem", {"TableName": "t", "ConsistentRead": True}, {}, sizes) == (1.0, 0.0)


def test_report_and_summary_show_the_monthly_cost_per_service() -> None:
    from carpool.sim.run import report, summary
    from carpool.sim.run.result import SimResult

    cost = own_cost.own_cost_of(Usage(seconds=HOUR, polled_queues=3, metric_series=2,
                                      functions={"watcher": FunctionUsage(512, 60, 60 * 50_000.0)}),
                                ["Carpool WatcherRuns {cluster=c}", "Carpool PodsUnboundSeconds {cluster=c}"])
    result = SimResult(scenario="s", duration_seconds=HOUR, own_cost=cost)
    page = report.render(result)
    assert f"${cost.monthly_usd:.2f} a month" in page
    for service, usd in cost.services.items():
        assert f"<td>{service}</td><td>{usd:.2f}</td>" in page
    line = summary.own_cost_line(result)
    assert f"${cost.monthly_usd:.2f}" in line and "Lambda" in line and "SQS" in line
    assert result.to_json_dict()["ownCost"]["metricSeries"] == sorted(cost.metric_series)


def _reference_size(value: dict) -> int:
    """The Developer Guide's rules, written out plainly (the meter's sizing must agree with them)."""
    import math

    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in raw)
    if kind == "NS":
        return sum(_reference_size({"N": n}) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "L":
        return 3 + sum(_reference_size(v) + 1 for v in raw)
    return 3 + sum(len(k.encode()) + _reference_size(v) + 1 for k, v in raw.items())


def _random_value(rng, depth: int = 0) -> dict:
    texts = ["", "a", "claim#default-1", "é", "nöde-ü", "日本語", "x" * 300, "emoji 🚀"]
    numbers = ["0", "-0.0100", "12345", "1736154900", "3.14159", "-7", "100000000000000000000"]
    kinds = ["S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS"] + (["L", "M"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "S":
        return {"S": rng.choice(texts)}
    if kind == "N":
        return {"N": rng.choice(numbers)}
    if kind == "B":
        return {"B": bytes(rng.randrange(256) for _ in range(rng.randrange(20)))}
    if kind in ("BOOL", "NULL"):
        return {kind: True}
    if kind == "SS":
        return {"SS": rng.sample(texts, 3)}
    if kind == "NS":
        return {"NS": rng.sample(numbers, 3)}
    if kind == "BS":
        return {"BS": [b"\x00\x01", b"abc"]}
    if kind == "L":
        return {"L": [_random_value(rng, depth + 1) for _ in range(rng.randrange(5))]}
    return {"M": {rng.choice(texts) + str(i): _random_value(rng, depth + 1) for i in range(rng.randrange(5))}}


def test_item_sizes_agree_with_the_rules_written_out_for_every_type() -> None:
    import random

    rng = random.Random(7)
    for _ in range(2000):
        item = {name: _random_value(rng) for name in rng.sample(["pk", "sk", "naïve", "instanceTypes", "n"], 3)}
        expected = sum(len(name.encode()) + _reference_size(v) for name, v in item.items())
        assert own_cost.item_size(item) == expected
    with pytest.raises(ValueError, match="unknown DynamoDB type"):
        own_cost.value_size({"X": "1"})


def test_items_are_known_by_table_and_key_whatever_the_key_order() -> None:
    from carpool.sim.run import usage

    meter = usage.UsageMeter()
    key = {"pk": {"S": "CLAIM#a"}, "sk": {"S": "CLAIM"}}
    assert usage._ref("t", key) == usage._ref("t", {"sk": {"S": "CLAIM"}, "pk": {"S": "CLAIM#a"}})
    assert usage._ref("t", key) != usage._ref("u", key)
    assert usage._ref("t", key) != usage._ref("t", {"pk": {"S": "CLAIM#a"}, "sk": {"S": "USAGE"}})
    usage._units("PutItem", {"TableName": "t", "Item": {**key, "v": {"S": "x" * 10}}}, {}, meter.sizes)
    usage._units("PutItem", {"TableName": "t", "Item": {"pk": {"S": "POOL#p"}, "sk": {"S": "USAGE"}}}, {},
                 meter.sizes)
    usage._units("PutItem", {"TableName": "i", "Item": {"id": {"S": "IDEM#k"}}}, {}, meter.sizes)
    assert meter.item_bytes() == {"CLAIM": 2 + 7 + 2 + 5 + 1 + 10, "IDEM": 2 + 6, "POOL": 2 + 6 + 2 + 5}
