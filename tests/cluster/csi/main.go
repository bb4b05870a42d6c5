// benchrun-loop-csi: the test cluster's CSI plugin (tests/cluster/csi.sh), behind the real
// Kubernetes CSI sidecars (external-provisioner, external-resizer, csi-snapshotter) and the
// real snapshot controller, so that benchrun's control-plane runs can measure snapshot, clone
// and expand through the same path a production CSI driver takes.
//
// Each volume is an ext4 file system in a sparse image ROOT/volumes/<id>.img; a pod mounts it
// through a loop device. A snapshot is a copy of the image (ROOT/snapshots/<id>.img); a clone
// or a restore is a copy of its source; an expansion grows the image and resizes its file
// system (offline with e2fsck + resize2fs on the image, online through the loop device).
// The copies are real work of the volume's size (sparse: of the data written), so their
// latency grows with the data, as a copying driver's would; no part is faked.
//
// Both kubelets of the test cluster run on this one machine and share its file system, so any
// node can mount any volume (no topology). One process per role:
//
//	--mode=controller  Identity + Controller services on --endpoint, the sidecars' socket
//	--mode=node        Identity + Node services on --endpoint for the kubelet of --node-id,
//	                   and the kubelet plugin registration service on
//	                   --registry/<driver>-reg.sock (what node-driver-registrar does, done
//	                   in-process: that sidecar is not served by the Go module proxy here)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const version = "0.1.0"

func main() {
	var (
		mode     = flag.String("mode", "", "controller or node")
		endpoint = flag.String("endpoint", "", "the CSI socket's path")
		root     = flag.String("root", "", "directory of the volume and snapshot images")
		driver   = flag.String("driver", "loop.csi.benchrun.dev", "the driver's name (the StorageClass's provisioner)")
		nodeID   = flag.String("node-id", "", "node mode: the Kubernetes node this plugin serves")
		registry = flag.String("registry", "", "node mode: the kubelet's plugins_registry directory")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if err := serve(*mode, *endpoint, *root, *driver, *nodeID, *registry); err != nil {
		klog.Errorf("%v", err)
		os.Exit(1)
	}
}

func serve(mode, endpoint, root, driver, nodeID, registry string) error {
	if endpoint == "" || root == "" {
		return errors.New("--endpoint and --root are required")
	}
	store, err := openStore(root)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(srv, &identity{name: driver})
	var reg *grpc.Server
	switch mode {
	case "controller":
		csi.RegisterControllerServer(srv, &controller{store: store})
	case "node":
		if nodeID == "" || registry == "" {
			return errors.New("node mode needs --node-id and --registry")
		}
		csi.RegisterNodeServer(srv, &node{store: store, id: nodeID})
		reg = grpc.NewServer()
		registration.RegisterRegistrationServer(reg, &registrar{name: driver, endpoint: endpoint})
	default:
		return fmt.Errorf("--mode must be controller or node, not %q", mode)
	}
	l, err := listen(endpoint)
	if err != nil {
		return err
	}
	go func() {
		if err := srv.Serve(l); err != nil {
			klog.Fatalf("serving %s: %v", endpoint, err)
		}
	}()
	klog.Infof("%s %s serving %s on %s (images under %s)", driver, mode, version, endpoint, root)
	if reg != nil {
		// The kubelet's plugin watcher finds this socket, asks GetInfo, then dials endpoint.
		path := filepath.Join(registry, driver+"-reg.sock")
		rl, err := listen(path)
		if err != nil {
			return err
		}
		go func() {
			if err := reg.Serve(rl); err != nil {
				klog.Fatalf("serving %s: %v", path, err)
			}
		}()
		klog.Infof("registration socket %s for node %s", path, nodeID)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if reg != nil {
		reg.Stop()
	}
	srv.Stop()
	return nil
}

// listen on a Unix socket, replacing a stale one left by an earlier process.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		klog.Infof("%s: %v", info.FullMethod, err)
	} else {
		klog.V(2).Infof("%s ok", info.FullMethod)
	}
	return resp, err
}

type identity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: version}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	exp := func(t csi.PluginCapability_VolumeExpansion_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: t}}}
	}
	caps := []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		exp(csi.PluginCapability_VolumeExpansion_OFFLINE),
	}
	// Online only where a mounted ext4 can be resized (see grow).
	if onlineResize() {
		caps = append(caps, exp(csi.PluginCapability_VolumeExpansion_ONLINE))
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type registrar struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type:              registration.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		// As node-driver-registrar does: a plugin the kubelet refused is of no use running.
		klog.Fatalf("the kubelet refused the registration: %s", s.Error)
	}
	klog.Infof("registered with the kubelet")
	return &registration.RegistrationStatusResponse{}, nil
}

func errorf(c codes.Code, format string, a ...any) error {
	return status.Errorf(c, format, a...)
}
