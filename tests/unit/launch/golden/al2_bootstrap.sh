#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'demo' \
--apiserver-endpoint 'https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com' \
--b64-cluster-ca 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwKY201bGRHVnpNQjRYRFRJMU1ERXdNVEF3TURBd01Gb1hEVE0xTURFd01UQXdNREF3TUZvd0ZURVRNQkVHQTFVRQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==' \
--dns-cluster-ip '10.100.0.10' \
--use-max-pods false \
--kubelet-extra-args '--node-labels=karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=payments --register-with-taints=dedicated=payments:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute,karpenter.sh/unregistered:NoExecute --max-pods=29 --kube-reserved=cpu=70m,ephemeral-storage=1Gi,memory=574Mi --system-reserved=cpu=100m,memory=100Mi --eviction-hard=memory.available<100Mi,nodefs.available<10%'
