// Command kvhandler-standin stands in for KubeVirt's virt-handler in test/long/test_kvchain.sh
// (test infrastructure only): the steps virt-handler takes on its node to hand a VMI to the
// virt-launcher of its Pod, made with KubeVirt v1.9.0's own code, built as a command of the
// kubevirt.io/kubevirt module (hack/kvhandler-build.sh), CGO_ENABLED=0, run as root in the
// qemu node (host PID namespace, kubelet's pods directory):
//
//   - the launcher's command socket under kubelet's pods directory, from the VMI's
//     status.activePods (virt-controller's), as virt-handler finds it (cmdclient.FindSocket);
//   - the launcher's PID from the socket's peer (isolation.NewSocketBasedIsolationDetector) and,
//     once its virtqemud runs, its memlock limit raised for VFIO (hypervisor/kvm
//     KvmVirtRuntime.AdjustResources, which virt-handler calls before each sync: the launcher's
//     container has no CAP_SYS_RESOURCE, libvirt cannot raise it for qemu itself);
//   - SyncVirtualMachine with the VMI (as the API server has it: the file the test wrote) and
//     virt-handler's options for a default configuration, again after a failure (virt-handler
//     requeues the VMI), until the launcher reports its domain Running (GetDomain).
//
// Not done (virt-handler's other work): the VMI's status is not written, no device plugins of
// its own (kvm, tun, vhost-net), no node labels, no domain event pipe, no migration.
//
//	kvhandler-standin --vmi FILE --node NAME [--pods-dir DIR] [--timeout D]
//
// DIR is kubelet's pods directory; virt-handler's DaemonSet mounts it at /pods, and so must a
// caller here (a bind mount: the socket's path under /var/lib/kubelet/pods is longer than a
// unix socket's 108 bytes, and KubeVirt's safepath follows no symlink).
//
// Prints what it did, one line each, with the time since it started; exit 0 once the domain
// runs, 1 on the timeout.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mitchellh/go-ps"
	v1 "kubevirt.io/api/core/v1"

	"kubevirt.io/client-go/log"
	v1cmd "kubevirt.io/kubevirt/pkg/handler-launcher-com/cmd/v1"
	"kubevirt.io/kubevirt/pkg/hypervisor/common"
	"kubevirt.io/kubevirt/pkg/hypervisor/kvm"
	cmdclient "kubevirt.io/kubevirt/pkg/virt-handler/cmd-client"
	"kubevirt.io/kubevirt/pkg/virt-handler/isolation"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
)

var start = time.Now()

func say(format string, a ...interface{}) {
	fmt.Printf("kvhandler-standin: [%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
}

func main() {
	vmiFile := flag.String("vmi", "", "the VMI as JSON")
	node := flag.String("node", "", "this node's name (NODE_NAME of virt-handler)")
	podsDir := flag.String("pods-dir", "/var/lib/kubelet/pods", "kubelet's pods directory")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after")
	flag.Parse()
	raw, err := os.ReadFile(*vmiFile)
	if err != nil {
		say("cannot read the VMI: %v", err)
		os.Exit(2)
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := json.Unmarshal(raw, vmi); err != nil {
		say("cannot parse the VMI: %v", err)
		os.Exit(2)
	}
	os.Setenv("NODE_NAME", *node)
	cmdclient.SetPodsBaseDir(*podsDir)
	log.InitializeLogging("kvhandler-standin")
	if run(vmi, start.Add(*timeout)) {
		os.Exit(0)
	}
	os.Exit(1)
}

// connect: the launcher's command socket found and answering Ping.
func connect(vmi *v1.VirtualMachineInstance, deadline time.Time) (cmdclient.LauncherClient, string) {
	last := ""
	for time.Now().Before(deadline) {
		socket, err := cmdclient.FindSocket(vmi)
		if err == nil {
			client, err := cmdclient.NewClient(socket)
			if err == nil {
				if err = client.Ping(); err == nil {
					return client, socket
				}
				client.Close()
			}
		}
		if err != nil && err.Error() != last {
			say("waiting for the launcher's command socket: %v", err)
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil, ""
}

// memlock: the launcher's virtqemud found (a child of the socket's owner), then virt-handler's
// own AdjustResources raises its memlock limit.
func memlock(vmi *v1.VirtualMachineInstance, deadline time.Time) bool {
	detector := isolation.NewSocketBasedIsolationDetector()
	for time.Now().Before(deadline) {
		res, err := detector.Detect(vmi)
		if err == nil {
			procs, perr := ps.Processes()
			if perr == nil {
				if p, _ := common.FindVirtqemudProcess(procs, res.Pid()); p != nil {
					rt := kvm.NewKvmVirtRuntime(detector, log.Log.With("component", "kvhandler-standin"))
					if err = rt.AdjustResources(vmi, &v1.KubeVirtConfiguration{}); err == nil {
						size := rt.CalculateMemlockSize(vmi, &v1.KubeVirtConfiguration{})
						say("launcher pid %d, its virtqemud pid %d: memlock limit set to %d bytes (AdjustResources)",
							res.Pid(), p.Pid(), size.Value())
						return true
					}
				}
			}
		}
		if err != nil {
			say("adjusting resources: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

func run(vmi *v1.VirtualMachineInstance, deadline time.Time) bool {
	say("VMI %s/%s uid %s phase %s, activePods %v", vmi.Namespace, vmi.Name, vmi.UID, vmi.Status.Phase, vmi.Status.ActivePods)
	client, socket := connect(vmi, deadline)
	if client == nil {
		say("timed out: no launcher socket answered")
		return false
	}
	defer client.Close()
	say("the launcher answers Ping on %s", socket)
	if !memlock(vmi, deadline) {
		say("timed out: no virtqemud in the launcher")
		return false
	}
	// virt-handler's options (pkg/virt-handler/options.go) for a default KubeVirt configuration.
	options := &v1cmd.VirtualMachineOptions{
		MemBalloonStatsPeriod: 10,
		DisksInfo:             map[string]*v1cmd.DiskInfo{},
		ClusterConfig:         &v1cmd.ClusterConfig{BochsDisplayForEFIGuests: true},
	}
	synced := false
	for time.Now().Before(deadline) {
		if !synced {
			if err := client.SyncVirtualMachine(vmi, options); err != nil {
				say("SyncVirtualMachine: %v (again in 2 s)", err)
				time.Sleep(2 * time.Second)
				continue
			}
			synced = true
			say("SyncVirtualMachine returned success")
		}
		dom, exists, err := client.GetDomain()
		if err == nil && exists && dom.Status.Status == api.Running {
			say("the launcher reports its domain %s Running", dom.ObjectMeta.Name)
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	say("timed out")
	return false
}
