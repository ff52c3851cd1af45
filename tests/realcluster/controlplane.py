"""A real Kubernetes control plane for one test run: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager, built from source by `../shared/kube-apiserver/build.sh` and
`../shared/kube-control-plane/build.sh` (their `start.sh` scripts are what the flags here follow).

Unlike those scripts' single shared server, a `ControlPlane` is the run's own: its own CA, its own free
ports and directory, so several run side by side and none outlives its `with` block. What differs from
`start.sh`, on purpose, to be as EKS is:

- `--client-ca-file` is the plane's CA: a hollow kubelet authenticates with a client certificate as
  `system:node:NAME` in `system:nodes` (`node_kubeconfig`), as an EKS node's kubelet does;
- `--authorization-mode=Node,RBAC` and NodeRestriction on top of the default admission plugins, so a
  kubelet may only touch its own Node and the labels it may set, as on EKS;
- an optional token webhook (`token_webhook_url`): carpool's functions send EKS tokens, which only an
  authenticator that asks STS can read (`authenticator.py`);
- Karpenter's CRDs and `infra/rbac.yaml` (bound to carpool's Kubernetes group, as the stack's
  `KubernetesAccessSetup` command binds it) are served before `__enter__` returns.
"""

from __future__ import annotations

import base64
import datetime
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "tests" / "data" / "karpenter-crds-v1.14.1"
RBAC_FILE = ROOT / "infra" / "rbac.yaml"
KUBE_HOME = Path(os.environ.get("KUBE_APISERVER_HOME", Path.home() / ".cache" / "carpool-kube-apiserver"))
BIN = KUBE_HOME / "bin"
#: the patched kubemark's home (built with tests/realcluster/patches/); REALCLUSTER_HOME as kubelets.py reads it
REALCLUSTER_BIN = Path(os.environ.get("REALCLUSTER_HOME", Path.home() / ".cache" / "carpool-realcluster")) / "bin"
ETCD = KUBE_HOME / "etcd" / "usr" / "bin" / "etcd"
NODEADM = Path(os.environ.get("NODEADM_HOME", Path.home() / ".cache" / "carpool-nodeadm")) / "bin" / "nodeadm"
#: the group the stack's access entries map carpool's function roles to (`infra/settings.py`)
CARPOOL_GROUP = "carpool-controller"
#: where Karpenter's Helm release runs by default; `infra/rbac.yaml`'s Lease Role is bound there
KARPENTER_NAMESPACE = "kube-system"
#: NodeRestriction added to the defaults the API server enables by itself (the flag only adds)
ADMISSION_PLUGINS = "NodeRestriction"
#: on a 2-core machine shared with other runs the API server takes 10-40 s to be ready
READY_SECONDS = 120.0
STOP_SECONDS = 5.0
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
RBAC = "/apis/rbac.authorization.k8s.io/v1"

SHARED = "/work/shared"
#: what to build, by the binary that is missing (the skip message names it)
HOW_TO_BUILD = {
    "etcd": f"Debian's etcd-server unpacked (dpkg -x) under {ETCD.parents[2]}, as {SHARED}/kube-apiserver/start.sh expects",
    "kube-apiserver": f"MIRROR=... {SHARED}/kube-apiserver/build.sh",
    "kube-scheduler": f"{SHARED}/kube-control-plane/build.sh",
    "kube-controller-manager": f"{SHARED}/kube-control-plane/build.sh",
    "kubemark": "../shared/kube-control-plane/build.sh with PATCH_DIR=tests/realcluster/patches (kubemark, OUT=~/.cache/carpool-realcluster/bin)",
    "nodeadm": "the nodeadm build (/work/shared/nodeadm/, into ~/.cache/carpool-nodeadm/bin/nodeadm)",
}


class ControlPlaneError(Exception):
    """A component did not start or a setup request was refused; the message names its log."""


def binary_paths() -> dict[str, Path]:
    """Where each binary the tier runs is expected."""
    return {"etcd": ETCD, "kube-apiserver": BIN / "kube-apiserver", "kube-scheduler": BIN / "kube-scheduler",
            "kube-controller-manager": BIN / "kube-controller-manager", "kubemark": REALCLUSTER_BIN / "kubemark",
            "nodeadm": NODEADM}


def missing_binaries(names: tuple[str, ...] = tuple(HOW_TO_BUILD)) -> list[str]:
    """The binaries of `names` that are not there (or not executable)."""
    paths = binary_paths()
    return [name for name in names if not os.access(paths[name], os.X_OK)]


def skip_reason(names: tuple[str, ...] = tuple(HOW_TO_BUILD)) -> str | None:
    """Why the tier cannot run here (what is missing and how to build it), or None when it can."""
    missing = missing_binaries(names)
    if not missing:
        return None
    steps = dict.fromkeys(HOW_TO_BUILD[name] for name in missing)  # in order, once each
    return "real-cluster tier: missing " + ", ".join(missing) + "; build with: " + "; ".join(steps)


def require_binaries(names: tuple[str, ...] = tuple(HOW_TO_BUILD)) -> None:
    """Skip the calling test, saying what to build, when any binary of `names` is missing."""
    import pytest

    reason = skip_reason(names)
    if reason:
        pytest.skip(reason)


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice; a race with another run is possible but rare)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- certificates -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CertificateAuthority:
    """The plane's CA: signs the API server's serving certificate and every client certificate."""

    cert: x509.Certificate
    key: rsa.RSAPrivateKey

    @classmethod
    def create(cls, name: str = "carpool-tier-ca") -> CertificateAuthority:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (_builder(subject, subject, key)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(cert, key)

    def issue(self, common_name: str, *, organizations: tuple[str, ...] = (), server: bool = False,
              ) -> tuple[bytes, bytes]:
        """A certificate and its key (PEM): a client's (CN = user, O = groups, as the API server reads a
        client certificate) or, with `server`, the API server's for 127.0.0.1 and localhost."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        names = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (_builder(x509.Name(names), self.cert.subject, key)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            import ipaddress

            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
                 x509.DNSName("kubernetes.default.svc")]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _builder(subject: x509.Name, issuer: x509.Name, key: rsa.RSAPrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2)))


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


# --- kubeconfigs --------------------------------------------------------------------------------------


def kubeconfig_text(endpoint: str, ca_file: Path, user: dict[str, str], name: str = "tier") -> str:
    """A one-cluster kubeconfig (`user` is `{"token": ...}` or `{"client-certificate": ..., "client-key": ...}`)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority": str(ca_file)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    })


def webhook_config_text(url: str) -> str:
    """`--authentication-token-webhook-config-file`: a kubeconfig whose cluster is the webhook (plain
    HTTP on 127.0.0.1: the authenticator runs inside the test process)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "authenticator", "cluster": {"server": url}}],
        "users": [{"name": "kube-apiserver", "user": {}}],
        "contexts": [{"name": "webhook", "context": {"cluster": "authenticator", "user": "kube-apiserver"}}],
        "current-context": "webhook",
    })


# --- the plane ----------------------------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver + kube-scheduler + kube-controller-manager on free ports of 127.0.0.1.

    Attributes once entered: `endpoint` (https://127.0.0.1:PORT), `ca_file` / `ca_key` (PEM files),
    `ca_data` (base64 PEM, as EKS's DescribeCluster gives it), `admin_token` (system:masters),
    `admin_kubeconfig`, `run_dir` (certificates, kubeconfigs, every component's log).
    """

    def __init__(self, *, run_dir: Path | None = None, token_webhook_url: str | None = None,
                 node_monitor_grace_seconds: float = 40.0, scheduler: bool = True,
                 controller_manager: bool = True, karpenter_namespace: str = KARPENTER_NAMESPACE,
                 carpool_group: str = CARPOOL_GROUP, extra_apiserver_flags: tuple[str, ...] = ()) -> None:
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="carpool-tier-"))
        self._own_dir = run_dir is None
        self.token_webhook_url = token_webhook_url
        self.node_monitor_grace_seconds = node_monitor_grace_seconds
        self.karpenter_namespace = karpenter_namespace
        self.carpool_group = carpool_group
        self._want_scheduler = scheduler
        self._want_controller_manager = controller_manager
        self._extra_apiserver_flags = extra_apiserver_flags
        self.admin_token = "admin-" + secrets.token_hex(16)
        self.ca_file = self.run_dir / "ca.crt"
        self.ca_key = self.run_dir / "ca.key"
        self.admin_kubeconfig = self.run_dir / "admin.kubeconfig"
        self.endpoint = ""
        self.ports: dict[str, int] = {}
        self._ca: CertificateAuthority | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._http: httpx2.Client | None = None

    # -- lifecycle

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Every component started and ready, the CRDs and carpool's RBAC served."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_credentials()
        self.ports = {name: free_port() for name in ("etcd", "etcd-peer", "apiserver", "scheduler", "kcm")}
        self.endpoint = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.admin_kubeconfig.write_text(kubeconfig_text(self.endpoint, self.ca_file, {"token": self.admin_token}))
        self._start_etcd()
        self._start_apiserver()
        if self._want_scheduler:
            self._start("kube-scheduler", self._scheduler_args(), health_port=self.ports["scheduler"])
        if self._want_controller_manager:
            self._start("kube-controller-manager", self._controller_manager_args(), health_port=self.ports["kcm"])
        apply_karpenter_crds(self)
        apply_carpool_rbac(self)

    def stop(self) -> None:
        """Every process stopped (TERM, then KILL after `STOP_SECONDS`), the controllers first; the run
        directory removed when the plane made it (unless `CARPOOL_TIER_KEEP` is set)."""
        scheduler = self._processes.pop("kube-scheduler", None)
        if scheduler is not None and scheduler.poll() is None:
            scheduler.kill()  # this build's scheduler ignores TERM (seen here, as ../kube-control-plane/start.sh notes)
            scheduler.wait(STOP_SECONDS)
        for name in reversed(list(self._processes)):  # one by one: an API server whose etcd is gone lingers
            stop_processes([self._processes.pop(name)])
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._own_dir and not os.environ.get("CARPOOL_TIER_KEEP"):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def alive(self) -> dict[str, bool]:
        """Whether each started component still runs (a crashed one is a failed test, not a hang)."""
        return {name: proc.poll() is None for name, proc in self._processes.items()}

    # -- requests

    @property
    def ca_data(self) -> str:
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    @property
    def http(self) -> httpx2.Client:
        if self._http is None:
            self._http = httpx2.Client(verify=ssl.create_default_context(cafile=str(self.ca_file)), timeout=30)
        return self._http

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                params: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> httpx2.Response:
        """A raw request as the admin (or as `token`), JSON body."""
        sent = {"Authorization": f"Bearer {token or self.admin_token}", **(headers or {})}
        return self.http.request(method, f"{self.endpoint}{path}", json=body, headers=sent, params=params)

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`kubectl --kubeconfig <admin> ARGS` (what a user at a terminal runs)."""
        return subprocess.run(["kubectl", "--kubeconfig", str(self.admin_kubeconfig), *args], input=input_text,
                              text=True, capture_output=True, check=check, timeout=120)

    # -- node credentials

    def client_certificate(self, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate and key (files in `run_dir`) for `user` in `groups`, signed by the plane's CA."""
        assert self._ca is not None, "start the plane first"
        cert, key = self._ca.issue(user, organizations=groups)
        stem = self.run_dir / "clients" / user.replace(":", "_")
        stem.parent.mkdir(exist_ok=True)
        cert_file, key_file = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        return cert_file, key_file

    def node_kubeconfig(self, node_name: str) -> Path:
        """A kubeconfig for node `node_name`'s kubelet: `system:node:NAME` in `system:nodes`, the identity
        the Node authorizer and NodeRestriction recognise (EKS's kubelets have the same after bootstrap)."""
        cert_file, key_file = self.client_certificate(f"system:node:{node_name}", ("system:nodes",))
        path = self.run_dir / "clients" / f"{node_name}.kubeconfig"
        path.write_text(kubeconfig_text(self.endpoint, self.ca_file,
                                        {"client-certificate": str(cert_file), "client-key": str(key_file)}))
        return path

    # -- components

    def _write_credentials(self) -> None:
        self._ca = CertificateAuthority.create()
        self.ca_file.write_bytes(self._ca.cert.public_bytes(serialization.Encoding.PEM))
        self.ca_key.write_bytes(_key_pem(self._ca.key))
        cert, key = self._ca.issue("kube-apiserver", server=True)
        (self.run_dir / "apiserver.crt").write_bytes(cert)
        (self.run_dir / "apiserver.key").write_bytes(key)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.run_dir / "sa.key").write_bytes(_key_pem(sa_key))
        (self.run_dir / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        (self.run_dir / "tokens.csv").write_text(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        if self.token_webhook_url:
            (self.run_dir / "token-webhook.kubeconfig").write_text(webhook_config_text(self.token_webhook_url))

    def _start_etcd(self) -> None:
        client, peer = (f"http://127.0.0.1:{self.ports[p]}" for p in ("etcd", "etcd-peer"))
        self._start("etcd", [str(ETCD), "--name", "tier", "--data-dir", str(self.run_dir / "etcd-data"),
                             "--listen-client-urls", client, "--advertise-client-urls", client,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"tier={peer}", "--initial-cluster-state", "new",
                             "--quota-backend-bytes", str(4 * 1024**3)])
        self._wait(lambda: httpx2.get(f"{client}/health", timeout=2).status_code == 200, "etcd")

    def _start_apiserver(self) -> None:
        run = self.run_dir
        args = [str(BIN / "kube-apiserver"),
                "--etcd-servers", f"http://127.0.0.1:{self.ports['etcd']}",
                "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                "--secure-port", str(self.ports["apiserver"]),
                "--tls-cert-file", str(run / "apiserver.crt"), "--tls-private-key-file", str(run / "apiserver.key"),
                "--cert-dir", str(run / "certs"), "--client-ca-file", str(self.ca_file),
                "--token-auth-file", str(run / "tokens.csv"), "--anonymous-auth=false",
                "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", ADMISSION_PLUGINS,
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-account-key-file", str(run / "sa.pub"),
                "--service-account-signing-key-file", str(run / "sa.key"),
                "--service-cluster-ip-range", "10.100.0.0/16", "--allow-privileged=true",
                "--max-requests-inflight", "800", "--max-mutating-requests-inflight", "400",
                "--v", "1"]
        if self.token_webhook_url:
            args += ["--authentication-token-webhook-config-file", str(run / "token-webhook.kubeconfig"),
                     "--authentication-token-webhook-version", "v1"]
        self._start("kube-apiserver", args + list(self._extra_apiserver_flags))
        self._wait(self._apiserver_ready, "kube-apiserver")

    def _apiserver_ready(self) -> bool:
        return self.request("GET", "/readyz").text == "ok"

    def _scheduler_args(self) -> list[str]:
        k = str(self.admin_kubeconfig)
        # CARPOOL_TIER_SCHEDULER: another build of the scheduler (to measure a patched one against this one)
        binary = os.environ.get("CARPOOL_TIER_SCHEDULER") or str(BIN / "kube-scheduler")
        return [binary, "--kubeconfig", k, "--authentication-kubeconfig", k,
                "--authorization-kubeconfig", k, "--bind-address", "127.0.0.1",
                "--secure-port", str(self.ports["scheduler"]), "--leader-elect=false"]

    def _controller_manager_args(self) -> list[str]:
        k = str(self.admin_kubeconfig)
        # no service-account token controller: as start.sh, nothing here runs in-cluster with a token
        return [str(BIN / "kube-controller-manager"), "--kubeconfig", k, "--authentication-kubeconfig", k,
                "--authorization-kubeconfig", k, "--bind-address", "127.0.0.1",
                "--secure-port", str(self.ports["kcm"]), "--leader-elect=false",
                "--controllers", "*,-serviceaccount-token", "--use-service-account-credentials=false",
                f"--node-monitor-grace-period={self.node_monitor_grace_seconds:g}s"]

    def _start(self, name: str, args: list[str], *, health_port: int | None = None) -> None:
        log = (self.run_dir / f"{name}.log").open("wb")
        self._processes[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        if health_port is not None:
            url = f"https://127.0.0.1:{health_port}/healthz"
            self._wait(lambda: httpx2.get(url, verify=False, timeout=2).text == "ok", name)

    def _wait(self, ready: Any, name: str) -> None:
        """Until `ready()` is true; a component that exits or stays unready fails, naming its log."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self._processes[name].poll() is not None:
                raise ControlPlaneError(f"{name} exited ({self._processes[name].returncode}): "
                                        f"{self.log_tail(name)}")
            try:
                if ready():
                    return
            except (httpx2.HTTPError, OSError):
                pass
            time.sleep(0.25)
        raise ControlPlaneError(f"{name} not ready after {READY_SECONDS:g} s: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.run_dir / f"{name}.log"
        text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
        return f"{path}:\n" + "\n".join(text)


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """TERM to all at once (the controllers first), then KILL what still runs after `STOP_SECONDS`:
    one by one, a controller waiting for its gone API server would make each stop take the full wait."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)


# --- what is loaded before the plane is handed over -----------------------------------------------------


def crd_documents() -> list[dict[str, Any]]:
    """Karpenter v1.14.1's CRDs as shipped (one per file)."""
    return [yaml.safe_load(path.read_text()) for path in sorted(CRD_DIR.glob("*.yaml"))]


def apply_karpenter_crds(plane: ControlPlane) -> list[str]:
    """Every CRD created, then waited for until Established (the server serves a kind only then)."""
    names = []
    for crd in crd_documents():
        _expect(plane.request("POST", CRDS, crd), f"creating CRD {crd['metadata']['name']}")
        names.append(crd["metadata"]["name"])
    for name in names:
        _until(lambda n=name: _established(plane, n), f"CRD {name} Established")
    return names


def _established(plane: ControlPlane, name: str) -> bool:
    conditions = plane.request("GET", f"{CRDS}/{name}").json().get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def rbac_documents(karpenter_namespace: str, group: str) -> list[tuple[str, dict[str, Any]]]:
    """`infra/rbac.yaml` and its two bindings, as the stack's `KubernetesAccessSetup` command makes them
    (`infra/stack.py` `kubernetes_access_setup`): (collection path, object) to create in order."""
    subject = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}]
    out: list[tuple[str, dict[str, Any]]] = []
    for doc in yaml.safe_load_all(RBAC_FILE.read_text()):
        if doc["kind"] == "Role":
            out.append((f"{RBAC}/namespaces/{karpenter_namespace}/roles", doc))
            out.append((f"{RBAC}/namespaces/{karpenter_namespace}/rolebindings", {
                "metadata": {"name": doc["metadata"]["name"]}, "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": doc["metadata"]["name"]}}))
        elif doc["kind"] == "ClusterRole":
            out.append((f"{RBAC}/clusterroles", doc))
            out.append((f"{RBAC}/clusterrolebindings", {
                "metadata": {"name": doc["metadata"]["name"]}, "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": doc["metadata"]["name"]}}))
    return out


def apply_carpool_rbac(plane: ControlPlane) -> None:
    """carpool's RBAC created and in force: the authorizer reads bindings through an informer, so the
    group is asked (SubjectAccessReview) until it may list nodes."""
    for path, body in rbac_documents(plane.karpenter_namespace, plane.carpool_group):
        _expect(plane.request("POST", path, body), f"creating {body['metadata']['name']} at {path}")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "carpool-probe", "groups": [plane.carpool_group],
                       "resourceAttributes": {"verb": "list", "resource": "nodes"}}}
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    _until(lambda: plane.request("POST", path, review).json().get("status", {}).get("allowed") is True,
           "carpool's ClusterRole in force")


def _expect(response: httpx2.Response, what: str) -> None:
    if response.status_code not in (200, 201):
        raise ControlPlaneError(f"{what}: {response.status_code} {response.text[:500]}")


def _until(check: Any, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"not so after {seconds:g} s: {what}")
        time.sleep(0.2)


def main(argv: list[str]) -> int:
    """`python -m tests.realcluster.controlplane --check`: say whether the tier can run here (exit 0) or
    what to build (exit 1). `make e2e-real` and `.ci/run` print it."""
    reason = skip_reason()
    print(reason or "real-cluster tier: every binary is built (" + ", ".join(
        str(p) for p in binary_paths().values()) + ")")
    return 1 if reason else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
