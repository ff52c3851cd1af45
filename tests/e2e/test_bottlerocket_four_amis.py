"""bottlerocket@latest resolves to four AMIs; each instance gets the one its type's labels match, and the
capacity cache learns what Bottlerocket nodes really report."""

import math

from .conftest import assert_allocatable_parity, registered

SCENARIO = "001-bottlerocket-four-amis.yaml"


def test_every_pod_runs(scenario_result):
    assert scenario_result.pods.pending == 0 and scenario_result.pods.total == 9


def test_each_instance_got_the_ami_of_its_arch_and_accelerator(scenario_result):
    assert scenario_result.launches
    for inst in scenario_result.launches:
        arch = {"amd64": "x86_64", "arm64": "aarch64"}[inst.arch]
        want = f"bottlerocket-aws-k8s-1.32-{'nvidia-' if inst.gpus else ''}{arch}-"
        assert inst.image_name.startswith(want), (inst.instance_type, inst.image_name)


def test_gpu_pod_got_a_gpu_instance_with_the_nvidia_ami(scenario_result):
    gpu = [i for i in scenario_result.launches if "nvidia" in i.image_name]
    assert len(gpu) == 1 and gpu[0].gpus >= 1
    assert scenario_result.workloads["Deployment/default/inference"].scheduled == 1


def test_all_three_kinds_of_node_were_launched(scenario_result):
    names = {i.image_name.rsplit("-v1", 1)[0] for i in scenario_result.launches}
    assert "bottlerocket-aws-k8s-1.32-x86_64" in names
    assert "bottlerocket-aws-k8s-1.32-aarch64" in names
    assert "bottlerocket-aws-k8s-1.32-nvidia-x86_64" in names


def test_capacity_cache_learned_the_amis_actually_used(scenario_result):
    learned = {(c.instance_type, c.image_id): c for c in scenario_result.capacity_cache}
    used = {(i.instance_type, i.image_id) for i in registered(scenario_result)}
    assert used and used <= set(learned), f"not learned: {used - set(learned)}"
    # nothing learned for an AMI no node ran
    assert {k[1] for k in learned} <= {i.image_id for i in scenario_result.launches}


def test_learned_memory_is_below_carpools_estimate(scenario_result):
    """Truth: Bottlerocket loses 10 % to overhead, carpool estimates 7.5 %: the cache must say less."""
    from carpool.catalog import Catalog

    types = Catalog.snapshot("us-east-1").types
    assert scenario_result.capacity_cache
    for entry in scenario_result.capacity_cache:
        it = types[entry.instance_type]
        mib = it.memory_mib - (64 if it.arch == "arm64" else 0)
        assert entry.memory_mi_b < mib - math.ceil(mib * 0.075), entry


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)
