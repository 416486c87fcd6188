module hostdevd.invalid/kubevirtcrds

go 1.26.0

require (
	k8s.io/apiextensions-apiserver v0.34.3
	k8s.io/apimachinery v0.34.3
	kubevirt.io/api v1.8.0
	kubevirt.io/kubevirt v1.9.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/openshift/custom-resource-status v1.1.2 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.34.3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/utils v0.0.0-20260319190234-28399d86e0b5 // indirect
	kubevirt.io/containerized-data-importer-api v1.64.0 // indirect
	kubevirt.io/controller-lifecycle-operator-sdk/api v0.2.4 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.2-0.20260122202528-d9cc6641c482 // indirect
)

replace kubevirt.io/kubevirt => ./kubevirt

replace kubevirt.io/api => kubevirt.io/api v1.9.0

replace kubevirt.io/client-go => kubevirt.io/client-go v1.9.0

replace k8s.io/api => k8s.io/api v0.34.2

replace k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.34.2

replace k8s.io/apimachinery => k8s.io/apimachinery v0.34.2

replace k8s.io/apiserver => k8s.io/apiserver v0.34.2

replace k8s.io/client-go => k8s.io/client-go v0.34.2

replace k8s.io/cloud-provider => k8s.io/cloud-provider v0.34.2

replace k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.34.2

replace k8s.io/code-generator => k8s.io/code-generator v0.34.2

replace k8s.io/component-base => k8s.io/component-base v0.34.2

replace k8s.io/cri-api => k8s.io/cri-api v0.34.2

replace k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.34.2

replace k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.2

replace k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.34.2

replace k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.2

replace k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.2

replace k8s.io/kubectl => k8s.io/kubectl v0.34.2

replace k8s.io/kubelet => k8s.io/kubelet v0.34.2

replace k8s.io/metrics => k8s.io/metrics v0.34.2

replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b

replace github.com/openshift/api => github.com/openshift/api v0.0.0-20210105115604-44119421ec6b

replace github.com/openshift/client-go => github.com/openshift/client-go v0.0.0-20210112165513-ebc401615f47

replace github.com/nxadm/tail => github.com/nxadm/tail v0.0.0-20211216163028-4472660a31a6
