// kubevirtcrds - KubeVirt v1.9.0's own CustomResourceDefinitions, as virt-operator installs them:
// the CRD constructors of kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components
// (schemas from its generated validations), marshalled as KubeVirt's tools/util.MarshallObject
// does for manifests/generated/kv-resource.yaml (creationTimestamp, status and the managed-by
// label dropped) but without its string fix-ups for templates, which break the quoting of some
// descriptions in the VirtualMachine CRD. Test infrastructure only.
//
//	kubevirtcrds DIR
//
// Writes DIR/<plural>.<group>.yaml for kubevirts, virtualmachineinstances, virtualmachines, and
// what virt-controller makes VMIs or VMs from: virtualmachineinstancereplicasets,
// virtualmachinepools (pool.kubevirt.io), virtualmachineinstancetypes and
// virtualmachineclusterinstancetypes (instancetype.kubevirt.io), virtualmachineclones
// (clone.kubevirt.io) and virtualmachinerestores (snapshot.kubevirt.io); each checked to read
// back as the object it was made from.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
)

func toMap(v interface{}) (map[string]interface{}, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	return m, json.Unmarshal(j, &m)
}

func write(dir string, crd *extv1.CustomResourceDefinition) error {
	obj, err := toMap(crd)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "labels", virtv1.ManagedByLabel)
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	out = append([]byte("---\n"), out...)
	var back map[string]interface{}
	if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, obj) {
		return fmt.Errorf("%s does not read back as written (%v)", crd.Name, err)
	}
	return os.WriteFile(filepath.Join(dir, crd.Name+".yaml"), out, 0o644)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubevirtcrds DIR")
		os.Exit(2)
	}
	for _, gen := range []func() (*extv1.CustomResourceDefinition, error){
		components.NewKubeVirtCrd,
		components.NewVirtualMachineInstanceCrd,
		components.NewVirtualMachineCrd,
		// What virt-controller makes VMIs or VMs from (docs/access-control.md, "the doors").
		components.NewReplicaSetCrd,
		components.NewVirtualMachinePoolCrd,
		components.NewVirtualMachineInstancetypeCrd,
		components.NewVirtualMachineClusterInstancetypeCrd,
		components.NewVirtualMachineCloneCrd,
		components.NewVirtualMachineRestoreCrd,
	} {
		crd, err := gen()
		if err == nil {
			err = write(os.Args[1], crd)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
			os.Exit(1)
		}
	}
}
