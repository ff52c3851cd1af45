"""AL2 user data: a bash script calling `/etc/eks/bootstrap.sh` with carpool's kubelet settings.

Without user data the script is the whole user data. With user data (a script or a MIME archive) the
result is a MIME archive with the user's parts first and carpool's bootstrap part last, as Karpenter
does (pkg/providers/amifamily/bootstrap/eksbootstrap.go): cloud-init runs parts in order, so the user's
preparation (mounts, sysctls, proxy settings) is in place before the kubelet starts, and carpool's
script is never spliced into a script whose shebang or `exit` it cannot know.

`--kube-reserved` always goes in the kubelet extra args: bootstrap.sh writes a kubeReserved for the
eni-max-pods.txt count into kubelet-config.json, and a kubelet flag takes precedence over the file.

Every argument is single-quoted for bash, but that only gets it as far as bootstrap.sh: the kubelet flags
then go through a single-quoted systemd `Environment=` line and a whitespace split, and the cluster name
and endpoint through `sed s,X,Y,g`. What those readers would misread is refused by `checks` before any
text is written.
"""

from __future__ import annotations

from carpool.launch.userdata import checks
from carpool.launch.userdata.bootstrap import NodeBootstrap, joined, kubelet_field_flags, quantities
from carpool.launch.userdata.mime import SHELL_SCRIPT, MimePart, looks_like_mime, parse_archive, serialize

BOOTSTRAP = "/etc/eks/bootstrap.sh"


def render(b: NodeBootstrap) -> str:
    script = bootstrap_script(b)
    if not b.user_data or not b.user_data.strip():
        return script
    user = parse_archive(b.user_data) if looks_like_mime(b.user_data) else [MimePart(SHELL_SCRIPT, b.user_data)]
    return serialize([*user, MimePart(SHELL_SCRIPT, script.rstrip("\n"))])


def quote(s: str) -> str:
    """Single-quote for bash, as `shlex.quote` does but always (so the output does not depend on the
    characters used): inside single quotes nothing is special, and a `'` closes, adds `"'"`, reopens."""
    return "'" + s.replace("'", "'\"'\"'") + "'"


def bootstrap_script(b: NodeBootstrap) -> str:
    checks.check(b)
    args = [
        f"{BOOTSTRAP} {quote(b.cluster_name)}",
        f"--apiserver-endpoint {quote(b.endpoint)}",
        f"--b64-cluster-ca {quote(b.ca_bundle)}",
    ]
    if b.ipv6:
        args.append("--ip-family ipv6")
    if b.cluster_dns:  # bootstrap.sh splits a comma-separated list into clusterDNS
        args.append(f"--dns-cluster-ip {quote(','.join([b.cluster_dns, *b.more_cluster_dns]))}")
    if b.max_pods is not None:
        # Otherwise bootstrap.sh writes its own ENI-based max pods, ignoring what carpool planned for.
        args.append("--use-max-pods false")
    args.append(f"--kubelet-extra-args {quote(' '.join(kubelet_extra_args(b)))}")
    if b.raid0:  # bootstrap.sh assembles the instance store into one array for the kubelet and containerd
        args.append("--local-disks raid0")
    return "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " \\\n".join(args),
            "",
        ]
    )


def kubelet_extra_args(b: NodeBootstrap) -> list[str]:
    """Kubelet flags. Kubelet's flag syntax has no quoting (`,` `=` `:` `<` are separators), so the values
    are held by `checks` to Kubernetes' label, taint and quantity characters, none of which is special."""
    args = []
    if b.labels:
        args.append("--node-labels=" + joined(dict(b.labels)))
    args.append("--register-with-taints=" + ",".join(str(t) for t in b.register_taints()))
    if b.max_pods is not None:
        args.append(f"--max-pods={b.max_pods}")
    if b.kube_reserved:
        args.append("--kube-reserved=" + joined(quantities(b.kube_reserved)))
    if b.system_reserved:
        args.append("--system-reserved=" + joined(quantities(b.system_reserved)))
    if b.eviction_hard:
        args.append("--eviction-hard=" + joined(dict(b.eviction_hard), "<"))
    args.extend(kubelet_field_flags(b))
    return args
