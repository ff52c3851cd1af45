"""StorageClass, PersistentVolume and PersistentVolumeClaim documents load like any other object."""

from __future__ import annotations

import pytest

from carpool.api.loader import ManifestErrors, load

DOCS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1a]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: db}
spec: {volumeName: pv-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {storageClassName: gp3}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: db}
spec:
  containers: [{name: c}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data}}
  - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {storageClassName: gp3}}}}
  - {name: config, configMap: {name: db}}
"""


def test_storage_objects_load_with_api_server_defaults() -> None:
    m = load(DOCS)
    (sc,) = m.storageclasses
    assert sc.volume_binding_mode == "Immediate" and sc.allowed_topologies == []
    assert [v.name for v in m.persistentvolumes] == ["pv-1"]
    assert [(c.namespace, c.name) for c in m.persistentvolumeclaims] == [("db", "data"), ("default", "data")]
    assert m.persistentvolumeclaims[1].spec.storage_class_name == "gp3"
    assert m.persistentvolumeclaims[0].spec.storage_class_name is None  # unset, not ""
    assert "1 StorageClass, 1 PersistentVolume, 2 PersistentVolumeClaims" in m.summary()


def test_pod_volumes_name_their_claims() -> None:
    (pod,) = load(DOCS).pods
    assert [v.claim_name(pod.name) for v in pod.spec.volumes] == ["data", "db-0-scratch", None]


@pytest.mark.parametrize(("doc", "message"), [
    ("apiVersion: storage.k8s.io/v1beta1\nkind: StorageClass\nmetadata: {name: x}\n", "expected 'storage.k8s.io/v1'"),
    ("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: x}\nvolumeBindingMode: Later\n",
     "volumeBindingMode"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: d}\n---\n"
     "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: d, namespace: default}\n",
     "duplicate PersistentVolumeClaim 'default/d'"),
])
def test_invalid_storage_documents_are_reported(doc: str, message: str) -> None:
    with pytest.raises(ManifestErrors) as err:
        load(doc)
    assert message in str(err.value)
