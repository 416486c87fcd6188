// fakecri is a container runtime for tests: k8s.io/cri-client's in-memory fake serving the CRI
// RuntimeService and ImageService on a unix socket, so a real kubelet runs pods without images,
// containers or a network. It records every CreateContainer as one JSON line (pod, container,
// envs, devices, CDI devices, mounts, annotations) so tests can check what kubelet asked for,
// for example what a device plugin's Allocate answer or a DRA driver's CDI device IDs became.
//
//	fakecri --socket /run/fakecri.sock --record /tmp/create.jsonl
//
// State lives in memory: a restarted fakecri makes kubelet create its pods again.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

type device struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	Permissions   string `json:"permissions"`
}

type mount struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	Readonly      bool   `json:"readonly"`
}

// record is one CreateContainer call, as written to the record file.
type record struct {
	Time        string            `json:"time"`
	Pod         string            `json:"pod"`
	Namespace   string            `json:"namespace"`
	PodUID      string            `json:"pod_uid"`
	Container   string            `json:"container"`
	Envs        map[string]string `json:"envs"`
	Devices     []device          `json:"devices"`
	CDIDevices  []string          `json:"cdi_devices"` // fully qualified names, vendor/class=name
	Mounts      []mount           `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
}

// runtime is the fake with CreateContainer recorded.
type runtime struct {
	*fake.RemoteRuntime
	mu  sync.Mutex
	out *os.File
}

func newRecord(req *runtimeapi.CreateContainerRequest) record {
	r := record{
		Time:        time.Now().UTC().Format(time.RFC3339Nano),
		Envs:        map[string]string{},
		Devices:     []device{},
		CDIDevices:  []string{},
		Mounts:      []mount{},
		Annotations: map[string]string{},
	}
	if md := req.GetSandboxConfig().GetMetadata(); md != nil {
		r.Pod, r.Namespace, r.PodUID = md.Name, md.Namespace, md.Uid
	}
	c := req.GetConfig()
	r.Container = c.GetMetadata().GetName()
	for _, e := range c.GetEnvs() {
		r.Envs[e.Key] = string(e.Value)
	}
	for _, d := range c.GetDevices() {
		r.Devices = append(r.Devices, device{d.ContainerPath, d.HostPath, d.Permissions})
	}
	for _, d := range c.GetCDIDevices() {
		r.CDIDevices = append(r.CDIDevices, d.GetName())
	}
	for _, m := range c.GetMounts() {
		r.Mounts = append(r.Mounts, mount{m.ContainerPath, m.HostPath, m.Readonly})
	}
	for k, v := range c.GetAnnotations() {
		r.Annotations[k] = v
	}
	return r
}

func (f *runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	line, err := json.Marshal(newRecord(req))
	if err != nil {
		return nil, fmt.Errorf("fakecri: encoding the record: %w", err)
	}
	f.mu.Lock()
	_, err = f.out.Write(append(line, '\n'))
	f.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("fakecri: writing the record: %w", err)
	}
	return f.RemoteRuntime.CreateContainer(ctx, req)
}

// configure sets what kubelet needs from a runtime: ready conditions, cgroupfs, a non-zero
// image size (0 leaves pods in ImageInspectError) and filesystem usage (for eviction).
func configure(f *fake.RemoteRuntime, fsDir string) {
	rs := f.RuntimeService
	rs.Lock()
	rs.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	rs.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS,
	}
	rs.Unlock()
	f.ImageService.SetFakeImageSize(1 << 20)
	usage := []*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: fsDir},
		UsedBytes:  &runtimeapi.UInt64Value{Value: 1 << 20},
		InodesUsed: &runtimeapi.UInt64Value{Value: 16},
	}}
	f.ImageService.SetFakeFilesystemUsage(usage)
	f.ImageService.SetFakeContainerFilesystemUsage(usage)
}

// trimCalls empties the fakes' call logs, which otherwise grow with every kubelet poll.
func trimCalls(f *fake.RemoteRuntime, every time.Duration) {
	for range time.Tick(every) {
		f.RuntimeService.Lock()
		f.RuntimeService.Called = f.RuntimeService.Called[:0]
		f.RuntimeService.Unlock()
		f.ImageService.Lock()
		f.ImageService.Called = f.ImageService.Called[:0]
		f.ImageService.Unlock()
	}
}

func main() {
	socket := flag.String("socket", "", "unix socket to serve the CRI on (required)")
	recordPath := flag.String("record", "", "file to append one JSON line per CreateContainer to (required)")
	fsDir := flag.String("fs-dir", "/var/lib", "mountpoint reported as the image and container filesystem")
	flag.Parse()
	if *socket == "" || *recordPath == "" {
		log.Fatal("fakecri: --socket and --record are required")
	}
	out, err := os.OpenFile(*recordPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatalf("fakecri: %v", err)
	}
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		log.Fatalf("fakecri: %v", err)
	}
	l, err := net.Listen("unix", *socket)
	if err != nil {
		log.Fatalf("fakecri: %v", err)
	}

	base := fake.NewFakeRemoteRuntime()
	configure(base, *fsDir)
	f := &runtime{RemoteRuntime: base, out: out}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	runtimeapi.RegisterImageServiceServer(srv, f)
	go trimCalls(base, 10*time.Second)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Stop()
	}()
	log.Printf("fakecri: serving on %s, recording to %s", *socket, *recordPath)
	if err := srv.Serve(l); err != nil {
		log.Fatalf("fakecri: %v", err)
	}
	os.Remove(*socket)
	log.Print("fakecri: stopped")
}
