"""The real-cluster tier (`make e2e-real`): carpool's real handlers against a real control plane (etcd,
kube-apiserver, kube-scheduler, kube-controller-manager) and kubemark's hollow kubelets, one per instance
local AWS runs, on the wall clock. Skipped, saying so, where the binaries are not built."""
