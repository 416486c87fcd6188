// kubeletpeer - kubelet's own device manager (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager
// v1.37.1: the registration server, the endpoint client, Allocate and PreStartContainer exactly
// as kubelet runs them) driven by a small main, for test/e2e/test_plugins.sh in the qemu node,
// where a whole kubelet would be too slow under emulation. Test infrastructure only.
//
//	kubeletpeer [--wait-resources N] [--timeout D] [--seen-file F] [--allocate RESOURCE[=COUNT]]...
//	            [--bench N] [--watch-file F [--watch-for D]]
//
// It serves kubelet.sock in /var/lib/kubelet/device-plugins (kubelet's constant; it removes the
// sockets there first, as kubelet does when it starts), waits until N resources have a healthy
// device (writing the time to --seen-file), then for each --allocate admits a pod whose one container asks for COUNT (default 1)
// of RESOURCE: the manager picks the devices, calls the plugin's GetPreferredAllocation (if it
// offers it and there is a choice), Allocate, and PreStartContainer (if required), and returns
// the container's run options. --bench N repeats the first allocation N times, each for a new
// pod (the previous one gone), and reports the median and worst time of the manager's Allocate.
// --watch-file F then keeps the manager running for D (default 10m) and appends one JSON line to
// F each time what it holds changes, polled every 20 ms: {"t": Unix seconds, "capacity",
// "allocatable" (an Unhealthy device counts in capacity only), "devices" (the healthy ones), "pod":
// the allocatedResourcesStatus kubelet gives the last allocated pod's container (KEP-4680: its
// devices' health as the plugin's ListAndWatch last sent it; a device the plugin no longer lists
// keeps "Healthy" there)}.
// Prints one JSON document on stdout; kubelet's log (klog) goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

var seen, watchFile *string

type allocFlags []string

func (a *allocFlags) String() string     { return strings.Join(*a, " ") }
func (a *allocFlags) Set(s string) error { *a = append(*a, s); return nil }

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

type device struct {
	ID        string  `json:"id"`
	Health    string  `json:"health"`
	NUMANodes []int64 `json:"numaNodes"` // nil: the plugin sent no topology
	Topology  bool    `json:"topology"`  // the plugin sent a TopologyInfo
}

type devSpec struct {
	ContainerPath string `json:"containerPath"`
	HostPath      string `json:"hostPath"`
	Permissions   string `json:"permissions"`
}

type allocation struct {
	Resource    string            `json:"resource"`
	Count       int               `json:"count"`
	Error       string            `json:"error,omitempty"`
	DeviceIDs   []string          `json:"deviceIDs"`
	Envs        map[string]string `json:"envs"`
	Devices     []devSpec         `json:"devices"`
	Mounts      []string          `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
	Seconds     float64           `json:"seconds"`      // the manager's Allocate
	StartSecs   float64           `json:"startSeconds"` // its container run options (PreStart)
}

type result struct {
	WaitedSeconds float64             `json:"waitedSeconds"`
	Capacity      map[string]int64    `json:"capacity"`
	Allocatable   map[string]int64    `json:"allocatable"`
	Devices       map[string][]device `json:"devices"`
	Allocations   []allocation        `json:"allocations"`
	Bench         map[string]any      `json:"bench,omitempty"`
	Error         string              `json:"error,omitempty"`
}

type peer struct {
	m      *devicemanager.ManagerImpl
	active []*v1.Pod
	n      int
}

func (p *peer) pod(res string, count int) *v1.Pod {
	p.n++
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", p.n), Namespace: "default",
			UID: types.UID(fmt.Sprintf("kubeletpeer-pod-%d", p.n))},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceName(res): *resource.NewQuantity(int64(count), resource.DecimalSI)},
		}}}},
	}
}

// allocate admits a new pod (the only active one) asking for COUNT of RES, as kubelet's
// admission and container start do: Allocate, then the container's run options.
func (p *peer) allocate(ctx context.Context, res string, count int) allocation {
	a := allocation{Resource: res, Count: count, Envs: map[string]string{}, Annotations: map[string]string{}}
	pod := p.pod(res, count)
	c := &pod.Spec.Containers[0]
	p.active = []*v1.Pod{pod}
	t0 := time.Now()
	err := p.m.Allocate(ctx, pod, c, lifecycle.AddOperation)
	a.Seconds = time.Since(t0).Seconds()
	if err != nil {
		a.Error = err.Error()
		return a
	}
	t1 := time.Now()
	opts, err := p.m.GetDeviceRunContainerOptions(ctx, pod, c)
	a.StartSecs = time.Since(t1).Seconds()
	if err != nil {
		a.Error = err.Error()
		return a
	}
	for id := range p.m.GetDevices(string(pod.UID), c.Name)[res] {
		a.DeviceIDs = append(a.DeviceIDs, id)
	}
	sort.Strings(a.DeviceIDs)
	for _, e := range opts.Envs {
		a.Envs[e.Name] = e.Value
	}
	for _, d := range opts.Devices {
		a.Devices = append(a.Devices, devSpec{d.PathInContainer, d.PathOnHost, d.Permissions})
	}
	for _, m := range opts.Mounts {
		a.Mounts = append(a.Mounts, m.HostPath+":"+m.ContainerPath)
	}
	for _, an := range opts.Annotations {
		a.Annotations[an.Name] = an.Value
	}
	return a
}

func (p *peer) snapshot(r *result) int {
	logger := klog.Background()
	capacity, allocatable, _ := p.m.GetCapacity(logger)
	r.Capacity, r.Allocatable = map[string]int64{}, map[string]int64{}
	for k, v := range capacity {
		r.Capacity[string(k)] = v.Value()
	}
	ready := 0
	for k, v := range allocatable {
		r.Allocatable[string(k)] = v.Value()
		if v.Value() > 0 {
			ready++
		}
	}
	r.Devices = map[string][]device{}
	for res, devs := range p.m.GetAllocatableDevices(logger) {
		for id, d := range devs {
			dv := device{ID: id, Health: d.Health, Topology: d.Topology != nil}
			if d.Topology != nil {
				for _, n := range d.Topology.Nodes {
					dv.NUMANodes = append(dv.NUMANodes, n.ID)
				}
			}
			r.Devices[res] = append(r.Devices[res], dv)
		}
		sort.Slice(r.Devices[res], func(i, j int) bool { return r.Devices[res][i].ID < r.Devices[res][j].ID })
	}
	return ready
}

func main() {
	var allocs allocFlags
	wait := flag.Int("wait-resources", 1, "resources with a healthy device to wait for")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for them")
	seen = flag.String("seen-file", "", "write the time (Unix seconds) the devices were seen here")
	bench := flag.Int("bench", 0, "repeat the first allocation N times; report the median")
	flag.Var(&allocs, "allocate", "RESOURCE[=COUNT] to allocate for a new pod (repeatable)")
	watchFile = flag.String("watch-file", "", "append what the manager holds here at each change")
	watchFor := flag.Duration("watch-for", 10*time.Minute, "how long --watch-file watches")
	klog.InitFlags(nil)
	flag.Parse()
	r := run(allocs, *wait, *timeout, *bench, *watchFor)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
	if r.Error != "" {
		os.Exit(1)
	}
}

func run(allocs []string, wait int, timeout time.Duration, bench int, watchFor time.Duration) *result {
	logger := klog.Background()
	ctx := klog.NewContext(context.Background(), logger)
	r := &result{}
	m, err := devicemanager.NewManagerImpl(logger, nil, topologymanager.NewFakeManager(logger))
	if err != nil {
		r.Error = "NewManagerImpl: " + err.Error()
		return r
	}
	p := &peer{m: m}
	t0 := time.Now()
	if err := m.Start(logger, func() []*v1.Pod { return p.active }, sourcesReady{},
		containermap.NewContainerMap(), sets.New[string]()); err != nil {
		r.Error = "Start: " + err.Error()
		return r
	}
	defer func() { _ = m.Stop(logger) }()
	for p.snapshot(r) < wait {
		if time.Since(t0) > timeout {
			r.Error = fmt.Sprintf("%d resources with healthy devices after %v, want %d", len(r.Allocatable), timeout, wait)
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.WaitedSeconds = time.Since(t0).Seconds()
	if *seen != "" {
		now := float64(time.Now().UnixNano()) / 1e9
		_ = os.WriteFile(*seen, []byte(fmt.Sprintf("%.3f\n", now)), 0o644)
	}
	for _, s := range allocs {
		res, n := s, 1
		if i := strings.LastIndex(s, "="); i > 0 {
			res = s[:i]
			if n, err = strconv.Atoi(s[i+1:]); err != nil {
				r.Error = "bad --allocate " + s
				return r
			}
		}
		r.Allocations = append(r.Allocations, p.allocate(ctx, res, n))
	}
	if bench > 0 && len(r.Allocations) > 0 {
		r.Bench = runBench(ctx, p, r.Allocations[0], bench)
	}
	if *watchFile != "" {
		p.watch(*watchFile, watchFor)
	}
	return r
}

// watch appends a line to file each time the manager's allocatable or devices change.
func (p *peer) watch(file string, d time.Duration) {
	last := ""
	logger := klog.Background()
	for t0 := time.Now(); time.Since(t0) < d; time.Sleep(20 * time.Millisecond) {
		var s result
		p.snapshot(&s)
		var pod []v1.ResourceStatus
		if len(p.active) > 0 {
			st := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c"}}}
			p.m.UpdateAllocatedResourcesStatus(logger, p.active[0], st)
			pod = st.ContainerStatuses[0].AllocatedResourcesStatus
		}
		b, _ := json.Marshal(map[string]any{"capacity": s.Capacity, "allocatable": s.Allocatable,
			"devices": s.Devices, "pod": pod})
		if string(b) == last {
			continue
		}
		last = string(b)
		line := fmt.Sprintf("{\"t\":%.3f,%s\n", float64(time.Now().UnixNano())/1e9, b[1:])
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		_, _ = f.WriteString(line)
		_ = f.Close()
	}
}

func runBench(ctx context.Context, p *peer, a allocation, n int) map[string]any {
	var ts, ss []float64
	for i := 0; i < n; i++ {
		b := p.allocate(ctx, a.Resource, a.Count)
		if b.Error != "" {
			return map[string]any{"resource": a.Resource, "error": b.Error, "done": i}
		}
		ts = append(ts, b.Seconds)
		ss = append(ss, b.StartSecs)
	}
	return map[string]any{"resource": a.Resource, "n": n, "medianMs": median(ts) * 1000,
		"worstMs": ts[n-1] * 1000, "startMedianMs": median(ss) * 1000}
}

// median sorts v (not empty) and returns its median.
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[n/2]
}
