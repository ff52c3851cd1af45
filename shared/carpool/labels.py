"""Well-known label, annotation and taint keys (Karpenter v1 and the AWS provider), plus carpool's own.

Kept in one place so that scheduling, launch, registration and disruption agree on spelling.
"""

from typing import Final

# Kubernetes / Karpenter core
NODEPOOL: Final = "karpenter.sh/nodepool"
CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
ARCH: Final = "kubernetes.io/arch"
OS: Final = "kubernetes.io/os"
HOSTNAME: Final = "kubernetes.io/hostname"
NODE_INITIALIZED: Final = "karpenter.sh/initialized"
REGISTERED: Final = "karpenter.sh/registered"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
#: node label: "true" tells registration not to add the NodePool's taints (a provider manages them)
DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"

WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"

#: Deprecated or aliased label keys and the well-known key they mean (Karpenter's `NormalizedLabels`, plus the
#: EBS CSI driver's zone key, which the AWS provider adds). Requirement keys are translated on construction,
#: so a pod or NodePool that still says `beta.kubernetes.io/arch` or `failure-domain.beta.kubernetes.io/zone`
#: selects the same nodes as one using the stable key.
NORMALIZED: Final = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "topology.ebs.csi.aws.com/zone": ZONE,
}
#: well-known key -> the aliases that mean it (to read a node that carries only an alias).
ALIASES: Final = {
    stable: tuple(old for old, new in NORMALIZED.items() if new == stable) for stable in set(NORMALIZED.values())
}


# AWS provider
_P: Final = "karpenter.k8s.aws/"
INSTANCE_FAMILY: Final = _P + "instance-family"
INSTANCE_CATEGORY: Final = _P + "instance-category"
INSTANCE_GENERATION: Final = _P + "instance-generation"
INSTANCE_SIZE: Final = _P + "instance-size"
INSTANCE_CPU: Final = _P + "instance-cpu"
INSTANCE_CPU_MANUFACTURER: Final = _P + "instance-cpu-manufacturer"
INSTANCE_MEMORY: Final = _P + "instance-memory"
INSTANCE_GPU_COUNT: Final = _P + "instance-gpu-count"
INSTANCE_GPU_NAME: Final = _P + "instance-gpu-name"
INSTANCE_GPU_MANUFACTURER: Final = _P + "instance-gpu-manufacturer"
INSTANCE_GPU_MEMORY: Final = _P + "instance-gpu-memory"
INSTANCE_ACCELERATOR_COUNT: Final = _P + "instance-accelerator-count"
INSTANCE_ACCELERATOR_NAME: Final = _P + "instance-accelerator-name"
INSTANCE_HYPERVISOR: Final = _P + "instance-hypervisor"
INSTANCE_NETWORK_BANDWIDTH: Final = _P + "instance-network-bandwidth"
INSTANCE_LOCAL_NVME: Final = _P + "instance-local-nvme"
CAPABILITY_FLEX: Final = _P + "capability-flex"
EC2NODECLASS: Final = _P + "ec2nodeclass"

# Values
CAPACITY_SPOT: Final = "spot"
CAPACITY_ON_DEMAND: Final = "on-demand"
CAPACITY_RESERVED: Final = "reserved"

# Cluster Autoscaler / EKS managed node groups
EKS_NODEGROUP: Final = "eks.amazonaws.com/nodegroup"
CAS_SCALE_DOWN_DISABLED: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

# carpool's own keys (Karpenter ignores unknown annotations, so manifests stay portable)
_C: Final = "carpool.dev/"
OWNED_BY: Final = _C + "owned-by"  # node label + EC2 tag: which carpool cluster launched it
CLAIM: Final = _C + "nodeclaim"  # node label + EC2 tag: the claim name
IMAGE_ID: Final = _C + "image-id"  # node label: the AMI the node was launched with
PREFIX_DELEGATION: Final = _C + "prefix-delegation"  # EC2NodeClass annotation: "true"/"false" forces it
CUSTOM_NETWORKING: Final = _C + "custom-networking"  # EC2NodeClass annotation: "true"/"false" forces it
UNREGISTERED_TAINT: Final = "karpenter.sh/unregistered"
DISRUPTED_TAINT: Final = "karpenter.sh/disrupted"

# Taints a node carries while it comes up (Karpenter's KnownEphemeralTaints): not initialized until gone
NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT: Final = "node.kubernetes.io/unreachable"
CLOUD_PROVIDER_UNINITIALIZED_TAINT: Final = "node.cloudprovider.kubernetes.io/uninitialized"
#: the Node Readiness Controller's taints (`readiness.k8s.io/<rule>`)
READINESS_TAINT_PREFIX: Final = "readiness.k8s.io/"

# EC2 tags carpool puts on what it launches (ownership for IAM conditions and orphan cleanup)
TAG_CLUSTER_OWNED: Final = "kubernetes.io/cluster/{cluster}"
TAG_MANAGED_BY: Final = "carpool.dev/cluster"
TAG_NODEPOOL: Final = NODEPOOL
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NODECLASS: Final = EC2NODECLASS

#: Label keys every node gets from its instance type; a requirement on one of these is satisfiable only by
#: the instance-type catalog, never by a user label.
WELL_KNOWN: Final = frozenset(
    {
        NODEPOOL, CAPACITY_TYPE, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, HOSTNAME, WINDOWS_BUILD,
        INSTANCE_FAMILY, INSTANCE_CATEGORY, INSTANCE_GENERATION, INSTANCE_SIZE, INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER, INSTANCE_MEMORY, INSTANCE_GPU_COUNT, INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER, INSTANCE_GPU_MEMORY, INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_ACCELERATOR_NAME, INSTANCE_HYPERVISOR, INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_LOCAL_NVME, CAPABILITY_FLEX, EC2NODECLASS,
    }
)


# -- what a kubelet may set on its own Node -------------------------------------------------------------
#: The label keys a kubelet may set on its own Node (k8s.io/kubelet/pkg/apis/well_known_labels.go
#: `kubeletLabels`).
KUBELET_LABELS: Final = frozenset(
    {
        HOSTNAME, ZONE, REGION, INSTANCE_TYPE, OS, ARCH,
        "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
    }
)
#: Label namespaces (and their subdomains) a kubelet may set (`kubeletLabelNamespaces`).
KUBELET_LABEL_NAMESPACES: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")
#: Domains whose labels the kubelet checks against the two lists above (cmd/kubelet/app/options
#: `isKubernetesLabel`).
KUBERNETES_LABEL_DOMAINS: Final = ("kubernetes.io", "k8s.io")


def _namespace(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def _in_domain(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def kubelet_may_set(key: str) -> bool:
    """Whether `--node-labels` may carry `key`: the kubelet refuses to start (ValidateKubeletFlags,
    "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels") when a label in a
    `kubernetes.io`/`k8s.io` domain is neither one of its own keys nor in its allowed namespaces.
    `node-restriction.kubernetes.io/` is outside both, by design: only the API server can set it."""
    namespace = _namespace(key)
    if not any(_in_domain(namespace, d) for d in KUBERNETES_LABEL_DOMAINS):
        return True
    return key in KUBELET_LABELS or any(_in_domain(namespace, n) for n in KUBELET_LABEL_NAMESPACES)
