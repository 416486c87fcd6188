module kubevirt.io/virt-template-api

go 1.26.0

require k8s.io/apimachinery v0.34.2
