// carpool-kubelet-config: nodeadm's reading of a node's user data and the kubelet configuration it would
// write, for one fake instance. Overlaid as nodeadm's cmd/carpool-kubelet-config (it needs the module's
// internal packages). Input: the user data file and the instance as JSON on the command line; output: JSON.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/api"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/cli"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/kubelet"
)

// instance is what nodeadm's enrichConfig learns from IMDS and EC2, plus what the kubelet step reads from
// the machine.
type instance struct {
	ID               string `json:"id"`
	Region           string `json:"region"`
	Type             string `json:"type"`
	AvailabilityZone string `json:"availabilityZone"`
	PrivateDNSName   string `json:"privateDnsName"`
	MAC              string `json:"mac"`
	PrivateIP        string `json:"privateIp"`
	VCPUs            int    `json:"vcpus"`
	KubeletVersion   string `json:"kubeletVersion"`
}

func run(userDataPath, instanceJSON string) error {
	var inst instance
	if err := json.Unmarshal([]byte(instanceJSON), &inst); err != nil {
		return fmt.Errorf("instance JSON: %w", err)
	}
	cfg, _, _, err := cli.ResolveConfig(zap.NewNop(), []string{"file://" + userDataPath}, "")
	if err != nil {
		return fmt.Errorf("nodeadm config: %w", err)
	}
	cfg.Status.KubeletVersion = inst.KubeletVersion
	cfg.Status.Instance = api.InstanceDetails{ID: inst.ID, Region: inst.Region, Type: inst.Type,
		AvailabilityZone: inst.AvailabilityZone, MAC: inst.MAC, PrivateDNSName: inst.PrivateDNSName}
	cfg.Status.Defaults = api.DefaultOptions{SandboxImage: "localhost/kubernetes/pause:latest"}
	// nodeadm init validates after enriching and before configuring any daemon
	if err := api.ValidateNodeConfig(cfg); err != nil {
		return fmt.Errorf("nodeadm validation: %w", err)
	}
	boot, err := kubelet.CarpoolKubeletBoot(cfg, inst.VCPUs, inst.PrivateIP)
	if err != nil {
		return fmt.Errorf("nodeadm kubelet config: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(boot)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: carpool-kubelet-config USERDATA_FILE INSTANCE_JSON")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
