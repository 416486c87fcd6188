// Package engine stands in for kubevirt.io/virt-template-engine v0.2.0, which the Go module
// proxy does not serve and which only virtctl imports: KubeVirt v1.9.0's go.mod requires it, so
// the module graph needs a go.mod for it, and nothing more. Test infrastructure only
// (hack/kubevirt-build.sh), never part of the product.
package engine
