"""What a simulated node reports: the scenario's truth, not carpool's estimate."""

from carpool import labels as L
from carpool.sim.kubelet import InstanceFacts, kube_reserved_cpu_millis, truth_resources
from carpool.sim.scenario import Truth

M5_LARGE = InstanceFacts("m5.large", vcpus=2, memory_mib=8192, arch="amd64", max_enis=3, ipv4_per_eni=10)


def test_kube_reserved_cpu_matches_the_eks_formula():
    assert [kube_reserved_cpu_millis(n) for n in (1, 2, 4, 8)] == [60, 70, 80, 90]


def test_al2023_truth_with_carpools_estimate_matches_the_reference_numbers():
    truth = Truth(memory_overhead_percent={"al2023": 7.5})
    capacity, allocatable = truth_resources(M5_LARGE, "al2023", 29, truth)
    assert capacity["memory"] == f"{7577 * 1024}Ki"
    assert allocatable["memory"] == f"{6903 * 1024}Ki" and allocatable["cpu"] == "1930m"
    assert capacity["pods"] == allocatable["pods"] == "29"


def test_bottlerocket_reports_less_memory_when_its_overhead_is_larger():
    truth = Truth(memory_overhead_percent={"al2023": 7.5, "bottlerocket": 10.0})
    al, _ = truth_resources(M5_LARGE, "al2023", 29, truth)
    br, _ = truth_resources(M5_LARGE, "bottlerocket", 29, truth)
    assert int(br["memory"][:-2]) < int(al["memory"][:-2])


def test_user_data_kube_reserved_is_obeyed():
    _, allocatable = truth_resources(M5_LARGE, "al2023", 110, Truth(memory_overhead_percent={"al2023": 7.5}),
                                     {"memory": "1465Mi", "cpu": "70m"})
    assert allocatable["memory"] == f"{(7577 - 1465 - 100) * 1024}Ki"


def test_arm64_loses_64_mib_and_gpu_types_expose_gpus():
    g = InstanceFacts("g5.xlarge", 4, 16384, "amd64", 4, 15, gpu_count=1, gpu_name="a10g", gpu_manufacturer="nvidia")
    capacity, allocatable = truth_resources(g, "al2023", 58, Truth())
    assert capacity["nvidia.com/gpu"] == allocatable["nvidia.com/gpu"] == "1"
    arm = InstanceFacts("m7g.large", 2, 8192, "arm64", 3, 10)
    truth = Truth(memory_overhead_percent={"al2023": 0.0})
    assert truth_resources(arm, "al2023", 29, truth)[0]["memory"] == f"{8128 * 1024}Ki"


def test_instance_labels():
    flex = InstanceFacts("c7i-flex.large", 2, 4096, "amd64", 3, 10).labels()
    assert flex[L.INSTANCE_FAMILY] == "c7i-flex" and flex[L.INSTANCE_CATEGORY] == "c"
    assert flex[L.INSTANCE_GENERATION] == "7" and flex[L.INSTANCE_SIZE] == "large"
    assert flex[L.CAPABILITY_FLEX] == "true"
    assert L.INSTANCE_GPU_COUNT not in flex
