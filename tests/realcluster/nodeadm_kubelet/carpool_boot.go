// Overlaid into nodeadm's internal/kubelet package (go build -overlay) so carpool's real-cluster tier can ask
// nodeadm's own code what kubelet configuration and flags it would write for a NodeConfig on a given
// instance, without running `nodeadm init` (which writes the host's kubelet and containerd configuration).
// Only the machine is faked: the CPU count (a fake /sys) and IMDS's local-ipv4.
package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/api"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/aws/imds"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/system"
)

// errNoSuchProperty: the fake IMDS knows only local-ipv4, the one property nodeadm's kubelet step reads on IPv4.
var errNoSuchProperty = errors.New("carpool fake IMDS: property not served")

type fakeIMDS struct{ localIPv4 string }

func (f fakeIMDS) GetInstanceIdentityDocument(context.Context) (*awsimds.GetInstanceIdentityDocumentOutput, error) {
	return nil, errNoSuchProperty
}

func (f fakeIMDS) GetUserData(context.Context) ([]byte, error) { return nil, errNoSuchProperty }

func (f fakeIMDS) GetProperty(_ context.Context, prop imds.IMDSProperty) (string, error) {
	if prop == imds.LocalIPv4 {
		return f.localIPv4, nil
	}
	return "", fmt.Errorf("%w: %s", errNoSuchProperty, prop)
}

// fakeCPUs is /sys/devices/system/cpu as nodeadm's Resources reads it when there is no NUMA topology.
func fakeCPUs(vcpus int) system.Resources {
	files := map[string]string{}
	for i := 0; i < vcpus; i++ {
		files[fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", i)] = "1"
	}
	return system.NewResources(system.FakeFileSystem{Files: files})
}

// CarpoolBoot is what nodeadm's kubelet daemon Configure step decides: the base config file
// (config.json), the user's drop-in (config.json.d/40-nodeadm.conf, nil without one) and the kubelet's
// command line (nodeadm's own flags, then the user's, which therefore win).
type CarpoolBoot struct {
	Config    *kubeletConfig    `json:"config"`
	DropIn    map[string]any    `json:"dropIn"`
	Flags     map[string]string `json:"flags"`
	UserFlags []string          `json:"userFlags"`
}

// CarpoolKubeletBoot runs nodeadm's generateKubeletConfig on cfg (its .status filled by the caller as
// nodeadm's enrichConfig would) for a machine of vcpus cores at localIPv4.
func CarpoolKubeletBoot(cfg *api.NodeConfig, vcpus int, localIPv4 string) (*CarpoolBoot, error) {
	k := &kubelet{resources: fakeCPUs(vcpus), imdsClient: fakeIMDS{localIPv4: localIPv4},
		environment: map[string]string{}, flags: map[string]string{}}
	kc, err := k.generateKubeletConfig(cfg)
	if err != nil {
		return nil, err
	}
	out := &CarpoolBoot{Config: kc, Flags: k.flags, UserFlags: cfg.Spec.Kubelet.Flags}
	if len(cfg.Spec.Kubelet.Config) > 0 {
		raw, err := json.Marshal(cfg.Spec.Kubelet.Config)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &out.DropIn); err != nil {
			return nil, err
		}
	}
	return out, nil
}
