// Package virttemplate stands in for kubevirt.io/virt-template-client-go/virttemplate v0.2.0,
// which the Go module proxy does not serve: the clientset constructor KubeVirt v1.9.0's informer
// factory calls. It only fails (virt-controller then panics), and KubeVirt calls it only with
// the Template and OCI export feature gates on. Test infrastructure only
// (hack/kubevirt-build.sh), never part of the product.
package virttemplate

import (
	"errors"

	"k8s.io/client-go/rest"
)

type TemplateV1beta1Interface interface {
	RESTClient() rest.Interface
}

type Interface interface {
	TemplateV1beta1() TemplateV1beta1Interface
}

func NewForConfig(*rest.Config) (Interface, error) {
	return nil, errors.New("virt-template is a stand-in in this build (hack/kubevirt-build.sh)")
}
