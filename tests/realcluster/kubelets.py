"""Hollow kubelets as EC2 nodes' kubelets: one patched kubemark process (`--morph=kubelet`) per `NodeSpec`.

Each kubelet boots as the instance would: the spec's KubeletConfiguration in a file read by `--config` (the
kubelet's own decoding, defaulting and validation), the machine's size, providerID and node IP from the
flags the patches in `tests/realcluster/patches/` add, and its own client certificate
(`CN=system:node:NAME, O=system:nodes`, signed by the control plane's CA), so the Node authorizer and
NodeRestriction treat it as EKS treats a node. From the control plane it takes only the endpoint, the CA
certificate and the CA key. Stopping a kubelet is the instance going away: its heartbeats stop, nothing
is cleaned up on the API server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from tests.realcluster.controlplane import CertificateAuthority, kubeconfig_text
from tests.realcluster.node_spec import NodeSpec

REALCLUSTER_HOME = Path(os.environ.get("REALCLUSTER_HOME", Path.home() / ".cache" / "carpool-realcluster"))
#: the kubemark built with `tests/realcluster/patches/` (the unpatched one has none of the flags used)
KUBEMARK = REALCLUSTER_HOME / "bin" / "kubemark"
HOW_TO_BUILD = ("the kubemark of ../shared/kube-control-plane/ built with the patches in tests/realcluster/patches/ "
                "(its PATCH_DIR; OUT=~/.cache/carpool-realcluster/bin, see its README)")
#: a kubelet asked to stop gets this long after SIGTERM before SIGKILL
STOP_SECONDS = 5.0
#: how much of a log an error quotes
LOG_TAIL_CHARS = 2000


class KubeletError(Exception):
    """A hollow kubelet could not be started or stopped as asked; the message names its log."""


class UnknownKubelet(KubeletError):
    """No kubelet of that name was started here (or it was already stopped)."""


class DuplicateKubelet(KubeletError):
    """A kubelet of that name is already running: one instance, one kubelet."""


class WholeCoresOnly(KubeletError):
    """cAdvisor reports whole cores; an instance type's vCPUs are whole, a fraction is a caller's bug."""


def skip_reason() -> str | None:
    """Why hollow kubelets cannot run here (the patched kubemark is missing), or None when they can."""
    if os.access(KUBEMARK, os.X_OK):
        return None
    return f"no patched kubemark at {KUBEMARK}; build it with {HOW_TO_BUILD}"


@dataclass
class RunningKubelet:
    """One started hollow kubelet: its process and the files its boot wrote."""

    spec: NodeSpec
    process: subprocess.Popen[bytes]
    directory: Path
    config_file: Path
    kubeconfig: Path
    log_file: Path
    #: the kubelet's API port on 127.0.0.1 (`--kubelet-port`)
    port: int

    @property
    def name(self) -> str:
        return self.spec.name

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code if the kubelet ends within `timeout` seconds (a refusal at start-up), else None."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice; a race with another run is possible but rare)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def machine_flags(spec: NodeSpec) -> list[str]:
    """The patched kubemark's flags for the machine and the identity the instance gives its kubelet."""
    cores, rest = divmod(spec.machine.cpu_millis, 1000)
    if rest or cores <= 0:
        raise WholeCoresOnly(f"{spec.name}: {spec.machine.cpu_millis}m is not a whole number of cores")
    return [f"--machine-cpu={cores}", f"--machine-memory={spec.machine.memory_bytes}",
            f"--machine-ephemeral-storage={spec.machine.ephemeral_storage_bytes}",
            f"--provider-id={spec.provider_id}", f"--node-ip={spec.node_ip}"]


def boot_flags(spec: NodeSpec) -> list[str]:
    """`--node-labels` and `--register-with-taints` as the boot passes them (absent when empty: an empty
    `--register-with-taints` would not override the configuration's `registerWithTaints`)."""
    flags = []
    if spec.node_labels:
        flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(spec.node_labels.items())))
    if spec.register_with_taints:
        flags.append("--register-with-taints=" + ",".join(t.flag() for t in spec.register_with_taints))
    return flags


def kubelet_args(spec: NodeSpec, *, binary: Path, kubeconfig: Path, config_file: Path, port: int) -> list[str]:
    """The whole command line of one hollow kubelet. `--max-pods` is not passed: it is the configuration's."""
    return [str(binary), "--morph=kubelet", f"--name={spec.name}", f"--kubeconfig={kubeconfig}",
            f"--config={config_file}", f"--kubelet-port={port}", "--kubelet-read-only-port=0",
            "--use-host-image-service=false", *machine_flags(spec), *boot_flags(spec)]


def config_document(spec: NodeSpec) -> str:
    """The KubeletConfiguration file: the spec's, with apiVersion and kind where the boot left them out."""
    doc = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **spec.kubelet_config}
    return json.dumps(doc, indent=2)  # JSON is YAML: the kubelet's loader reads either


class NodeCredentials:
    """Client certificates for kubelets, signed by the control plane's CA (read from its two files)."""

    def __init__(self, ca_file: Path, ca_key: Path) -> None:
        key = serialization.load_pem_private_key(Path(ca_key).read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise KubeletError(f"{ca_key}: the CA key is not RSA")
        self._ca = CertificateAuthority(x509.load_pem_x509_certificate(Path(ca_file).read_bytes()), key)

    def write_kubeconfig(self, node_name: str, endpoint: str, ca_file: Path, directory: Path) -> Path:
        """A kubeconfig authenticating as `system:node:NAME` in `system:nodes`, as an EKS node's kubelet."""
        cert, key = self._ca.issue(f"system:node:{node_name}", organizations=("system:nodes",))
        cert_file, key_file = directory / "kubelet.crt", directory / "kubelet.key"
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        path = directory / "kubeconfig"
        path.write_text(kubeconfig_text(endpoint, ca_file,
                                        {"client-certificate": str(cert_file), "client-key": str(key_file)},
                                        name=node_name))
        return path


class HollowKubelets:
    """The hollow kubelets of one run, by Node name. Use as a context manager, or call `stop_all`."""

    def __init__(self, endpoint: str, ca_file: Path, ca_key: Path, *, run_dir: Path | None = None,
                 binary: Path = KUBEMARK) -> None:
        self.endpoint = endpoint
        self.ca_file = Path(ca_file)
        self.binary = Path(binary)
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="carpool-kubelets-"))
        self._credentials = NodeCredentials(self.ca_file, Path(ca_key))
        self._kubelets: dict[str, RunningKubelet] = {}

    def __enter__(self) -> HollowKubelets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    @property
    def names(self) -> list[str]:
        """The kubelets started here and still running (a refused one has exited and is not listed)."""
        return sorted(name for name, kubelet in self._kubelets.items() if kubelet.alive())

    def get(self, name: str) -> RunningKubelet:
        try:
            return self._kubelets[name]
        except KeyError:
            raise UnknownKubelet(f"no hollow kubelet {name} here") from None

    def start(self, spec: NodeSpec) -> RunningKubelet:
        """Write the node's files and start its kubelet; returns at once (registration takes seconds).
        A kubelet that refuses its flags or configuration exits: see `RunningKubelet.wait_exit` and `log`."""
        if spec.name in self.names:
            raise DuplicateKubelet(f"hollow kubelet {spec.name} is already running")
        directory = self.run_dir / spec.name
        shutil.rmtree(directory, ignore_errors=True)  # a name reused after a stop boots afresh
        directory.mkdir(parents=True)
        config_file = directory / "kubelet-config.json"
        config_file.write_text(config_document(spec))
        kubeconfig = self._credentials.write_kubeconfig(spec.name, self.endpoint, self.ca_file, directory)
        port, log_file = free_port(), directory / "kubelet.log"
        args = kubelet_args(spec, binary=self.binary, kubeconfig=kubeconfig, config_file=config_file, port=port)
        # TMPDIR: the hollow kubelet's root and static pod directories are temporary ones, kept per node
        env = {**os.environ, "TMPDIR": str(directory)}
        with log_file.open("wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
        kubelet = RunningKubelet(spec, process, directory, config_file, kubeconfig, log_file, port)
        self._kubelets[spec.name] = kubelet
        return kubelet

    def stop(self, name: str) -> None:
        """Stop one kubelet, as its instance terminating: SIGTERM, then SIGKILL after STOP_SECONDS."""
        kubelet = self._kubelets.pop(name, None)
        if kubelet is None:
            raise UnknownKubelet(f"no hollow kubelet {name} here")
        _stop_process(kubelet.process)

    def stop_all(self) -> None:
        for name in list(self._kubelets):
            self.stop(name)


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=STOP_SECONDS)
