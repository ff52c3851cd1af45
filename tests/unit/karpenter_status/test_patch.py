"""Only a change is written: `merge_patch` is RFC 7386's diff, None when nothing moved."""

from carpool.karpenter_status.patch import merge_patch


def test_equal_statuses_send_nothing() -> None:
    status = {"nodes": 2, "resources": {"cpu": "4"}, "conditions": [{"type": "Ready"}]}
    assert merge_patch(status, dict(status)) is None


def test_changed_keys_are_sent_and_dropped_ones_are_nulled() -> None:
    before = {"nodes": 2, "resources": {"cpu": "4", "nvidia.com/gpu": "1"}, "subnets": [{"id": "a"}]}
    after = {"nodes": 3, "resources": {"cpu": "6"}, "conditions": []}
    assert merge_patch(before, after) == {
        "nodes": 3, "resources": {"cpu": "6", "nvidia.com/gpu": None}, "subnets": None, "conditions": []}


def test_lists_are_sent_whole() -> None:
    before = {"conditions": [{"type": "A", "status": "True"}, {"type": "Ready", "status": "True"}]}
    after = {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "False"}]}
    assert merge_patch(before, after) == after
