// Package libnbd stands in for libguestfs.org/libnbd v1.25.2-5-g48df7c4d2b (the Go binding of
// the C library libnbd), which the Go module proxy does not serve: the names KubeVirt v1.9.0's
// pkg/storage/nbdclient (virt-launcher's NBD server for backups) uses. Create fails, so that
// server answers with an error; nothing else of virt-launcher uses it. Test infrastructure only
// (hack/kubevirt-build.sh), never part of the product.
package libnbd

import "errors"

const (
	CONTEXT_BASE_ALLOCATION   = "base:allocation"
	CONTEXT_QEMU_DIRTY_BITMAP = "qemu:dirty-bitmap:"
	STATE_HOLE                = uint32(1)
	STATE_ZERO                = uint32(2)
	STATE_DIRTY               = uint32(1)
)

type LibnbdExtent struct {
	Length uint64
	Flags  uint64
}

type ExtentCallback64 func(metacontext string, offset uint64, entries []LibnbdExtent, err *int) int

type BlockStatus64Optargs struct{}

type PreadOptargs struct{}

type Libnbd struct{}

var errStandIn = errors.New("libnbd is a stand-in in this build (hack/kubevirt-build.sh)")

func Create() (*Libnbd, error) { return nil, errStandIn }

func (*Libnbd) Close() {}

func (*Libnbd) AddMetaContext(string) error { return errStandIn }

func (*Libnbd) CanMetaContext(string) (bool, error) { return false, errStandIn }

func (*Libnbd) GetSize() (uint64, error) { return 0, errStandIn }

func (*Libnbd) SetExportName(string) error { return errStandIn }

func (*Libnbd) ConnectUnix(string) error { return errStandIn }

func (*Libnbd) Pread([]byte, uint64, *PreadOptargs) error { return errStandIn }

func (*Libnbd) BlockStatus64(uint64, uint64, ExtentCallback64, *BlockStatus64Optargs) error {
	return errStandIn
}
