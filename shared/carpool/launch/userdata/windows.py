"""Windows user data: a PowerShell block calling the EKS Windows AMI's `Start-EKSBootstrap.ps1`.

The layout is Karpenter's (pkg/providers/amifamily/bootstrap/windows.go): `<powershell>`, the node class's
own `spec.userData` first (so its preparation runs before the kubelet starts), then the bootstrap call with
`-EKSClusterName`, `-APIServerEndpoint`, `-Base64ClusterCA`, `-KubeletExtraArgs` and `-DNSClusterIP`, then
`</powershell>`. EC2Launch runs the first `<powershell>` block it finds, so a tag inside the user's text
would end carpool's block early: user data wrapped in one `<powershell>...</powershell>` pair is unwrapped,
any other tag is refused.

The kubelet extra args state max pods and kube-reserved explicitly, as every other family's user data does:
the Windows bootstrap reserves nothing by itself, so without them the node's allocatable would not be the
one the scheduler packed against. Every value was held to Kubernetes' label, taint and quantity syntax by
`checks`, so no value holds a quote or a space; the arguments are still written as PowerShell single-quoted
strings (a `'` doubled), and map flags double-quoted for the Windows service command line, as Karpenter does.
"""

from __future__ import annotations

import re

from carpool.launch.userdata import checks
from carpool.launch.userdata.bootstrap import NodeBootstrap, joined, kubelet_field_flags, quantities
from carpool.launch.userdata.mime import UserDataError

BOOTSTRAP_SCRIPT = r'[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"'
_TAG = re.compile(r"</?powershell>", re.IGNORECASE)
_WRAPPED = re.compile(r"^\s*<powershell>(.*)</powershell>\s*$", re.IGNORECASE | re.DOTALL)
#: characters PowerShell reads as a single quote (it accepts the typographic ones too)
_SINGLE_QUOTES = "'\u2018\u2019\u201a\u201b"


def render(b: NodeBootstrap) -> str:
    checks.check(b)
    checks.one_cluster_dns(b, "Windows (Start-EKSBootstrap.ps1 -DNSClusterIP)")
    if b.raid0:
        raise UserDataError("RAID0 is not supported on Windows: the EKS Windows bootstrap has no instance store "
                            "setup (Karpenter ignores it there)", field="spec.instanceStorePolicy")
    lines = ["<powershell>"]
    user = user_script(b.user_data)
    if user:
        lines.append(user)
    lines.append(BOOTSTRAP_SCRIPT)
    lines.append(bootstrap_call(b))
    lines.append("</powershell>")
    return "\n".join(lines)


def quote(s: str) -> str:
    """A PowerShell single-quoted string: nothing inside is special except a single quote, written twice."""
    out = "".join(ch * 2 if ch in _SINGLE_QUOTES else ch for ch in s)
    return f"'{out}'"


def user_script(user_data: str | None) -> str:
    """The node class's PowerShell, without one wrapping `<powershell>` pair; refuses any other tag."""
    if not user_data or not user_data.strip():
        return ""
    wrapped = _WRAPPED.match(user_data)
    text = wrapped.group(1) if wrapped else user_data
    if _TAG.search(text):
        raise UserDataError(
            "a <powershell> tag inside the script would end the bootstrap block early; give the PowerShell "
            "without tags (or wrapped in exactly one <powershell>...</powershell> pair)", field="spec.userData")
    return text.strip("\n")


def bootstrap_call(b: NodeBootstrap) -> str:
    parts = [
        "& $EKSBootstrapScriptFile",
        f"-EKSClusterName {quote(b.cluster_name)}",
        f"-APIServerEndpoint {quote(b.endpoint)}",
        f"-Base64ClusterCA {quote(b.ca_bundle)}",
        f"-KubeletExtraArgs {quote(' '.join(kubelet_extra_args(b)))}",
    ]
    if b.cluster_dns:
        parts.append(f"-DNSClusterIP {quote(b.cluster_dns)}")
    return " ".join(parts)


def kubelet_extra_args(b: NodeBootstrap) -> list[str]:
    """Kubelet flags in Karpenter's order: labels, taints, max pods, reservations, eviction thresholds."""
    args = []
    if b.labels:
        args.append(f'--node-labels="{joined(dict(b.labels))}"')
    args.append(f'--register-with-taints="{",".join(str(t) for t in b.register_taints())}"')
    if b.max_pods is not None:
        args.append(f"--max-pods={b.max_pods}")
    if b.system_reserved:
        args.append(f'--system-reserved="{joined(quantities(b.system_reserved))}"')
    if b.kube_reserved:
        args.append(f'--kube-reserved="{joined(quantities(b.kube_reserved))}"')
    if b.eviction_hard:
        args.append(f'--eviction-hard="{joined(dict(b.eviction_hard), "<")}"')
    args.extend(kubelet_field_flags(b, quoted=True))
    return args
