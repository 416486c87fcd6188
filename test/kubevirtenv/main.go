// kubevirtenv - KubeVirt v1.9.0's own reader of device-plugin environment variables
// (kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice: the address pools
// virt-launcher fills from PCI_RESOURCE_<NAME> / USB_RESOURCE_<NAME>, and the libvirt host devices
// it makes of them), run on this process's environment, for test/e2e/test_plugins.sh; and its
// reader of DRA device metadata files (pkg/dra, KEP-5304 metadata.resource.k8s.io/v1alpha1) with
// the DRA host-device builder (hostdevice/dra). Test infrastructure only.
//
//	kubevirtenv [--pci RESOURCE]... [--usb RESOURCE]...
//	kubevirtenv --dra-base DIR --dra-claim NAME[:RESOURCECLAIMNAME] --dra-request REQUEST
//
// Device plugins: one VMI hostDevices entry per flag. Prints one JSON document: the variable
// each resource is read from, and the host devices (type, managed, source address) or the error
// virt-launcher would get.
//
// DRA: a VMI with one resourceClaims entry NAME (a direct claim of ResourceClaim
// RESOURCECLAIMNAME, or without it one made from a template, whose metadata KubeVirt looks up by
// NAME) and one hostDevices entry "hostdev0" with claimRequest {NAME, REQUEST}; DIR is what
// virt-launcher reads at /var/run/kubernetes.io/dra-device-attributes. Prints
// {"pciAddress", "error"} from dra.GetPCIAddressForClaim, and "hostDevices", "hostDevicesXML"
// (the libvirt <hostdev> elements) or "hostDevicesError" from dra.CreateDRAHostDevices. Exits 1
// when either failed ("error" is empty on success).
//
// hack/kubevirtenv-build.sh builds it against a copy of the v1.9.0 module without
// hostdevice/hotplug.go (libvirt hot-plug, whose cgo-only constants do not build with
// CGO_ENABLED=0); the files that read the variables are KubeVirt's, unchanged.
package main

import (
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"strings"

	v1 "kubevirt.io/api/core/v1"

	"kubevirt.io/kubevirt/pkg/dra"
	"kubevirt.io/kubevirt/pkg/util"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice"
	drahostdevice "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice/dra"
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
	UUID     string `json:"uuid,omitempty"`
	Model    string `json:"model,omitempty"`
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
		h := hostDev{Type: d.Type, Mode: d.Mode, Managed: d.Managed, Model: d.Model}
		if d.Alias != nil {
			h.Alias = d.Alias.GetName()
		}
		if a := d.Source.Address; a != nil {
			h.Domain, h.Bus, h.Slot, h.Function, h.Device = a.Domain, a.Bus, a.Slot, a.Function, a.Device
			h.UUID = a.UUID
		}
		out = append(out, h)
	}
	return out
}

type draResult struct {
	PCIAddress       string    `json:"pciAddress"`
	Error            string    `json:"error"`
	HostDevices      []hostDev `json:"hostDevices"`
	HostDevicesXML   string    `json:"hostDevicesXML,omitempty"`
	HostDevicesError string    `json:"hostDevicesError,omitempty"`
}

// draVMI is a VMI with the one claim NAME[:RESOURCECLAIMNAME] and one DRA host device.
func draVMI(claim, request string) *v1.VirtualMachineInstance {
	name, claimName, direct := strings.Cut(claim, ":")
	rc := v1.VirtualMachineInstanceResourceClaim{Name: name}
	if direct {
		rc.ResourceClaimName = &claimName
	} else {
		rc.ResourceClaimTemplateName = &name // (not read: template metadata is found by NAME)
	}
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.ResourceClaims = []v1.VirtualMachineInstanceResourceClaim{rc}
	vmi.Spec.Domain.Devices.HostDevices = []v1.HostDevice{{Name: "hostdev0",
		ClaimRequest: &v1.ClaimRequest{ClaimName: name, RequestName: request}}}
	return vmi
}

func runDRA(base, claim, request string) int {
	vmi := draVMI(claim, request)
	r := draResult{HostDevices: []hostDev{}}
	addr, err := dra.GetPCIAddressForClaim(base, vmi.Spec.ResourceClaims,
		vmi.Spec.ResourceClaims[0].Name, request)
	r.PCIAddress = addr
	if err != nil {
		r.Error = err.Error()
	}
	devs, err := drahostdevice.CreateDRAHostDevices(vmi, base)
	if err != nil {
		r.HostDevicesError = err.Error()
	}
	r.HostDevices = convert(devs)
	for _, d := range devs {
		x, err := xml.MarshalIndent(d, "", "  ")
		if err != nil {
			r.HostDevicesError = err.Error()
			break
		}
		r.HostDevicesXML += string(x) + "\n"
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(r)
	if r.Error != "" || r.HostDevicesError != "" {
		return 1
	}
	return 0
}

func main() {
	var pci, usb list
	flag.Var(&pci, "pci", "a PCI resource name (one VMI hostDevices entry; repeatable)")
	flag.Var(&usb, "usb", "a USB resource name (one VMI hostDevices entry; repeatable)")
	draBase := flag.String("dra-base", "", "DRA mode: the device metadata directory (virt-launcher's "+dra.DefaultMetadataBasePath+")")
	draClaim := flag.String("dra-claim", "", "DRA mode: the VMI's resource claim, NAME[:RESOURCECLAIMNAME] (without one: from a template)")
	draRequest := flag.String("dra-request", "", "DRA mode: the request name in the claim")
	flag.Parse()
	if *draBase != "" || *draClaim != "" || *draRequest != "" {
		if *draBase == "" || *draClaim == "" || *draRequest == "" || len(pci)+len(usb) > 0 {
			fmt.Fprintln(os.Stderr, "kubevirtenv: DRA mode takes --dra-base, --dra-claim and --dra-request, and no --pci or --usb")
			os.Exit(2)
		}
		os.Exit(runDRA(*draBase, *draClaim, *draRequest))
	}
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
