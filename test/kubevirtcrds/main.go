// kubevirtcrds - KubeVirt v1.9.0's own CustomResourceDefinitions, as virt-operator installs them:
// the CRD constructors of kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components
// (schemas from its generated validations) marshalled by tools/util.MarshallObject, as
// tools/resource-generator does for manifests/generated/kv-resource.yaml. Test infrastructure
// only.
//
//	kubevirtcrds DIR
//
// Writes DIR/<plural>.<group>.yaml for kubevirts, virtualmachineinstances and virtualmachines.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/tools/util"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubevirtcrds DIR")
		os.Exit(2)
	}
	for _, gen := range []func() (*extv1.CustomResourceDefinition, error){
		components.NewKubeVirtCrd,
		components.NewVirtualMachineInstanceCrd,
		components.NewVirtualMachineCrd,
	} {
		crd, err := gen()
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
			os.Exit(1)
		}
		var buf bytes.Buffer
		if err := util.MarshallObject(crd, &buf); err != nil {
			fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
			os.Exit(1)
		}
		path := filepath.Join(os.Args[1], crd.Name+".yaml")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
			os.Exit(1)
		}
	}
}
