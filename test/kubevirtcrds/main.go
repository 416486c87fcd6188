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
// back as the object it was made from. DIR/virt-controller/ gets the other kinds KubeVirt's
// virt-controller watches (it waits for every informer to sync, so it needs them all: migrations,
// migration policies, snapshots and their contents, exports, backups and backup trackers,
// preferences and cluster preferences) and kubevirt-controller-rbac.yaml: virt-controller's
// ServiceAccount, ClusterRole, ClusterRoleBinding, Role and RoleBinding in namespace kubevirt,
// as virt-operator makes them (pkg/virt-operator/resource/generate/rbac, GetAllController; no
// NetworkAttachmentDefinition rules, as on a cluster without Multus).
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

	"k8s.io/apimachinery/pkg/runtime"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/rbac"
)

func toMap(v interface{}) (map[string]interface{}, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	return m, json.Unmarshal(j, &m)
}

// marshal: one YAML document of the object, checked to read back as it.
func marshal(name string, v interface{}) ([]byte, error) {
	obj, err := toMap(v)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "labels", virtv1.ManagedByLabel)
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out = append([]byte("---\n"), out...)
	var back map[string]interface{}
	if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, obj) {
		return nil, fmt.Errorf("%s does not read back as written (%v)", name, err)
	}
	return out, nil
}

func write(dir string, crd *extv1.CustomResourceDefinition) error {
	out, err := marshal(crd.Name, crd)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, crd.Name+".yaml"), out, 0o644)
}

// writeControllerRBAC: virt-controller's service account and roles, one file.
func writeControllerRBAC(dir string) error {
	var all []byte
	for _, o := range rbac.GetAllController("kubevirt", false) {
		out, err := marshal(fmt.Sprintf("%T", o), o.(runtime.Object))
		if err != nil {
			return err
		}
		all = append(all, out...)
	}
	return os.WriteFile(filepath.Join(dir, "kubevirt-controller-rbac.yaml"), all, 0o644)
}

func writeAll(dir string, gens []func() (*extv1.CustomResourceDefinition, error)) {
	for _, gen := range gens {
		crd, err := gen()
		if err == nil {
			err = write(dir, crd)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
			os.Exit(1)
		}
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubevirtcrds DIR")
		os.Exit(2)
	}
	writeAll(os.Args[1], []func() (*extv1.CustomResourceDefinition, error){
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
	})
	// The rest of what virt-controller watches, and its RBAC (test_kvrender.sh).
	vc := filepath.Join(os.Args[1], "virt-controller")
	if err := os.Mkdir(vc, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
		os.Exit(1)
	}
	writeAll(vc, []func() (*extv1.CustomResourceDefinition, error){
		components.NewVirtualMachineInstanceMigrationCrd,
		components.NewMigrationPolicyCrd,
		components.NewVirtualMachineSnapshotCrd,
		components.NewVirtualMachineSnapshotContentCrd,
		components.NewVirtualMachineExportCrd,
		components.NewVirtualMachineBackupCrd,
		components.NewVirtualMachineBackupTrackerCrd,
		components.NewVirtualMachinePreferenceCrd,
		components.NewVirtualMachineClusterPreferenceCrd,
	})
	if err := writeControllerRBAC(vc); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirtcrds:", err)
		os.Exit(1)
	}
}
