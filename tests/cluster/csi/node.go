package main

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

type node struct {
	csi.UnimplementedNodeServer
	store *store
	id    string
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.id}, nil
}

// No STAGE_UNSTAGE_VOLUME (a loop mount per pod is all a volume needs) and no node expansion
// (the controller resizes the file system).
func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume mounts the volume's image at the pod's target path through a loop device.
func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, errorf(codes.InvalidArgument, "no target path")
	}
	path, err := n.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer n.store.lock(req.GetVolumeId())()
	if _, err := size(path); err != nil {
		return nil, err
	}
	if on, err := n.store.attachedTo(req.GetVolumeId()); err != nil {
		return nil, err
	} else if on != n.id {
		return nil, errorf(codes.FailedPrecondition, "volume %s is not attached to node %s (attached to %q): ControllerPublishVolume first", req.GetVolumeId(), n.id, on)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, errorf(codes.Internal, "%v", err)
	}
	if ok, err := mounted(target); err != nil {
		return nil, errorf(codes.Internal, "%v", err)
	} else if ok {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	opts := "loop"
	if req.GetReadonly() {
		opts += ",ro"
	}
	if err := run("mount", "-t", "ext4", "-o", opts, path, target); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts (the loop device detaches with it: mount -o loop sets autoclear).
func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, errorf(codes.InvalidArgument, "no target path")
	}
	defer n.store.lock(req.GetVolumeId())()
	if ok, err := mounted(target); err != nil {
		return nil, errorf(codes.Internal, "%v", err)
	} else if ok {
		if err := run("umount", target); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errorf(codes.Internal, "%v", err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
