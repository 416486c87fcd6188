// kubevirtenv - KubeVirt v1.9.0's own reader of device-plugin environment variables
// (kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice: the address pools
// virt-launcher fills from PCI_RESOURCE_<NAME> / USB_RESOURCE_<NAME>, and the libvirt host devices
// it makes of them), run on this process's environment, for test/e2e/test_plugins.sh. Test
// infrastructure only.
//
//	kubevirtenv [--pci RESOURCE]... [--usb RESOURCE]...
//
// One VMI hostDevices entry per flag. Prints one JSON document: the variable each resource is
// read from, and the host devices (type, managed, source address) or the error virt-launcher
// would get. hack/kubevirtenv-build.sh builds it against a copy of the v1.9.0 module without
// hostdevice/hotplug.go (libvirt hot-plug, whose cgo-only constants do not build with
// CGO_ENABLED=0); the files that read the variables are KubeVirt's, unchanged.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	v1 "kubevirt.io/api/core/v1"

	"kubevirt.io/kubevirt/pkg/util"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

type hostDev struct {
	Type     string `json:"type"`
	Mode     string `json:"mode,omitempty"`
	Managed  string `json:"managed,omitempty"`
	Alias    string `json:"alias"`
	Domain   string `json:"domain,omitempty"`
	Bus      string `json:"bus"`
	Slot     string `json:"slot,omitempty"`
	Function string `json:"function,omitempty"`
	Device   string `json:"device,omitempty"`
}

type result struct {
	EnvVars map[string]string `json:"envVars"`
	PCI     []hostDev         `json:"pci"`
	USB     []hostDev         `json:"usb"`
	Errors  []string          `json:"errors,omitempty"`
}

func metadata(prefix string, resources []string) []hostdevice.HostDeviceMetaData {
	var md []hostdevice.HostDeviceMetaData
	for i, r := range resources {
		md = append(md, hostdevice.HostDeviceMetaData{AliasPrefix: prefix,
			Name: fmt.Sprintf("hostdev%d", i), ResourceName: r})
	}
	return md
}

func convert(devs []api.HostDevice) []hostDev {
	out := []hostDev{}
	for _, d := range devs {
		h := hostDev{Type: d.Type, Mode: d.Mode, Managed: d.Managed}
		if d.Alias != nil {
			h.Alias = d.Alias.GetName()
		}
		if a := d.Source.Address; a != nil {
			h.Domain, h.Bus, h.Slot, h.Function, h.Device = a.Domain, a.Bus, a.Slot, a.Function, a.Device
		}
		out = append(out, h)
	}
	return out
}

func main() {
	var pci, usb list
	flag.Var(&pci, "pci", "a PCI resource name (one VMI hostDevices entry; repeatable)")
	flag.Var(&usb, "usb", "a USB resource name (one VMI hostDevices entry; repeatable)")
	flag.Parse()
	r := result{EnvVars: map[string]string{}, PCI: []hostDev{}, USB: []hostDev{}}
	for _, p := range pci {
		r.EnvVars[p] = util.ResourceNameToEnvVar(v1.PCIResourcePrefix, p)
	}
	for _, u := range usb {
		r.EnvVars[u] = util.ResourceNameToEnvVar(v1.USBResourcePrefix, u)
	}
	devs, err := hostdevice.CreatePCIHostDevices(metadata("hostdevice-", pci),
		hostdevice.NewAddressPool(v1.PCIResourcePrefix, pci))
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.PCI = convert(devs)
	devs, err = hostdevice.CreateUSBHostDevices(metadata("", usb),
		hostdevice.NewAddressPool(v1.USBResourcePrefix, usb))
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.USB = convert(devs)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
	if len(r.Errors) > 0 {
		os.Exit(1)
	}
}
