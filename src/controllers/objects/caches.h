/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/caches.h - the informers of our four kinds, for a part that reads them
 * together (borrowed, owned by whoever runs them): the KubeVirt reconciler's cluster-wide ones,
 * the device plugins' of this node. Any may be NULL where a part does not need it.
 */
#pragma once

struct kube_informer;

struct caches {
    struct kube_informer *pci_claims;
    struct kube_informer *pci_devices;
    struct kube_informer *usb_claims;
    struct kube_informer *usb_devices;
};
