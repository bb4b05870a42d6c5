package main

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A claim that asks for no size gets this; every size is rounded up to whole MiB.
const (
	defaultBytes = 1 << 30
	mib          = 1 << 20
)

type controller struct {
	csi.UnimplementedControllerServer
	store *store
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkCapabilities: mounted file systems on one node at a time (an ext4 image cannot be
// shared), never raw block.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return errorf(codes.InvalidArgument, "no volume capability given")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return errorf(codes.InvalidArgument, "loop.csi.benchrun.dev provisions volumeMode Filesystem only, not Block")
		}
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		default:
			return errorf(codes.InvalidArgument, "access mode %v: an ext4 image mounts on one node at a time (ReadWriteOnce, ReadWriteOncePod)", c.GetAccessMode().GetMode())
		}
	}
	return nil
}

func roundUp(b int64) int64 { return (b + mib - 1) / mib * mib }

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	path, err := c.store.volume(req.GetName())
	if err != nil {
		return nil, err
	}
	want := int64(defaultBytes)
	if r := req.GetCapacityRange(); r != nil && r.GetRequiredBytes() > 0 {
		want = roundUp(r.GetRequiredBytes())
	}
	if l := req.GetCapacityRange().GetLimitBytes(); l > 0 && want > l {
		return nil, errorf(codes.OutOfRange, "%d bytes (rounded up to whole MiB) exceed the limit %d", want, l)
	}
	defer c.store.lock(req.GetName())()
	src := req.GetVolumeContentSource()
	if have, err := size(path); err == nil {
		// A retry of a create that finished: the same volume, if it is the same request.
		if have < want {
			return nil, errorf(codes.AlreadyExists, "volume %s exists with %d bytes, %d asked", req.GetName(), have, want)
		}
		return response(req.GetName(), have, src), nil
	}
	switch {
	case src.GetSnapshot() != nil:
		from, err := c.store.snapshot(src.GetSnapshot().GetSnapshotId())
		if err != nil {
			return nil, err
		}
		if err := c.copyFrom(from, path, want); err != nil {
			return nil, err
		}
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		from, err := c.store.volume(id)
		if err != nil {
			return nil, err
		}
		defer c.store.lock(id)()
		if err := c.copyFrom(from, path, want); err != nil {
			return nil, err
		}
	default:
		if err := makeImage(path, want); err != nil {
			return nil, err
		}
	}
	return response(req.GetName(), want, src), nil
}

// copyFrom: a clone or a restore, refused when the source is larger than the new volume.
func (c *controller) copyFrom(from, path string, want int64) error {
	have, err := size(from)
	if err != nil {
		return err
	}
	if have > want {
		return errorf(codes.OutOfRange, "the source has %d bytes, more than the %d asked", have, want)
	}
	return copyImage(from, path, want)
}

func response(id string, bytes int64, src *csi.VolumeContentSource) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: bytes, ContentSource: src}}
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	path, err := c.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer c.store.lock(req.GetVolumeId())()
	if node, err := c.store.attachedTo(req.GetVolumeId()); err != nil {
		return nil, err
	} else if node != "" {
		return nil, errorf(codes.FailedPrecondition, "volume %s is still published to node %s", req.GetVolumeId(), node)
	}
	if dev, err := loopOf(path); err != nil {
		return nil, err
	} else if dev != "" {
		return nil, errorf(codes.FailedPrecondition, "volume %s is still mounted (%s)", req.GetVolumeId(), dev)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errorf(codes.Internal, "%v", err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerPublishVolume attaches a volume to one node (the external-attacher calls it for a
// VolumeAttachment): recorded in the store, where that node's NodePublishVolume looks for it,
// as a real driver's node finds a disk only once the controller has attached it there. A
// volume attached elsewhere is refused: an ext4 image mounts on one node at a time.
func (c *controller) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	node := req.GetNodeId()
	if node == "" {
		return nil, errorf(codes.InvalidArgument, "no node id")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	path, err := c.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer c.store.lock(req.GetVolumeId())()
	if _, err := size(path); err != nil {
		return nil, err
	}
	had, err := c.store.attachedTo(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if had != "" && had != node {
		return nil, errorf(codes.FailedPrecondition, "volume %s is attached to node %s, not %s", req.GetVolumeId(), had, node)
	}
	if err := c.store.setAttached(req.GetVolumeId(), node); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

// ControllerUnpublishVolume detaches it; a volume that is gone or attached elsewhere counts
// as detached from this node (the spec's idempotent OK).
func (c *controller) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if _, err := c.store.volume(req.GetVolumeId()); err != nil {
		return nil, err
	}
	defer c.store.lock(req.GetVolumeId())()
	had, err := c.store.attachedTo(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if had != "" && (req.GetNodeId() == "" || had == req.GetNodeId()) {
		if err := c.store.setAttached(req.GetVolumeId(), ""); err != nil {
			return nil, err
		}
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	path, err := c.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := size(path); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

// CreateSnapshot copies the volume's image as it is on disk now: crash-consistent, as a
// block-level snapshot of a mounted volume is.
func (c *controller) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	path, err := c.store.snapshot(req.GetName())
	if err != nil {
		return nil, err
	}
	from, err := c.store.volume(req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	defer c.store.lock(req.GetName())()
	if _, err := size(path); err != nil {
		if err := run("sync", "-f", from); err != nil {
			return nil, err
		}
		if err := copyImage(from, path, 0); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, errorf(codes.Internal, "%v", err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId:     req.GetName(),
		SourceVolumeId: req.GetSourceVolumeId(),
		SizeBytes:      st.Size(),
		CreationTime:   timestamppb.New(st.ModTime()),
		ReadyToUse:     true,
	}}, nil
}

func (c *controller) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	path, err := c.store.snapshot(req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	defer c.store.lock(req.GetSnapshotId())()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errorf(codes.Internal, "%v", err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ControllerExpandVolume grows the image and its file system here (both kubelets share this
// machine's disk), so no node step is left: the claim's capacity is updated when this returns.
// A mounted volume is grown online where the plugin may (CAP_SYS_RESOURCE), else refused
// with FailedPrecondition until no pod uses it (see grow).
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	path, err := c.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	want := roundUp(req.GetCapacityRange().GetRequiredBytes())
	defer c.store.lock(req.GetVolumeId())()
	if err := grow(path, want); err != nil {
		return nil, err
	}
	have, err := size(path)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: have, NodeExpansionRequired: false}, nil
}
