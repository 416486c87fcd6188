// Package v1beta1 stands in for kubevirt.io/virt-template-api/core/v1beta1 v0.2.0, which the Go
// module proxy does not serve: the VirtualMachineTemplate fields KubeVirt v1.9.0's VM export
// controller and export server read. Test infrastructure only (hack/kubevirt-build.sh), never
// part of the product.
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var GroupVersion = schema.GroupVersion{Group: "template.kubevirt.io", Version: "v1beta1"}

const ConditionReady = "Ready"

type Parameter struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

type VirtualMachineTemplateSpec struct {
	Parameters     []Parameter           `json:"parameters,omitempty"`
	VirtualMachine *runtime.RawExtension `json:"virtualMachine,omitempty"`
}

type VirtualMachineTemplateStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

type VirtualMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VirtualMachineTemplateSpec   `json:"spec"`
	Status            VirtualMachineTemplateStatus `json:"status,omitempty"`
}

func (in *VirtualMachineTemplate) DeepCopy() *VirtualMachineTemplate {
	if in == nil {
		return nil
	}
	out := &VirtualMachineTemplate{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Parameters = append([]Parameter(nil), in.Spec.Parameters...)
	if in.Spec.VirtualMachine != nil {
		out.Spec.VirtualMachine = in.Spec.VirtualMachine.DeepCopy()
	}
	for i := range in.Status.Conditions {
		var c metav1.Condition
		in.Status.Conditions[i].DeepCopyInto(&c)
		out.Status.Conditions = append(out.Status.Conditions, c)
	}
	return out
}

func (in *VirtualMachineTemplate) DeepCopyObject() runtime.Object { return in.DeepCopy() }
