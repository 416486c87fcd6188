// Package core stands in for kubevirt.io/virt-template-api/core v0.2.0, which the Go module
// proxy does not serve: the names KubeVirt v1.9.0's informers and VM export admitter use. Test
// infrastructure only (hack/kubevirt-build.sh), never part of the product.
package core

const (
	GroupName            = "template.kubevirt.io"
	SingularResourceName = "virtualmachinetemplate"
	PluralResourceName   = "virtualmachinetemplates"
)
