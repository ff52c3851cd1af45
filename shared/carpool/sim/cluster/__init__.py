"""The simulated Kubernetes cluster: an in-memory API server (`simulated`) and its HTTP face (`apiserver`),
kubelets that turn local EC2 instances into Nodes (`kubelet`, `nodeboot`, `userdata`), DaemonSet agents
(`agents`) and the workload's controllers (`workload`). Imports neither the run nor local AWS."""
