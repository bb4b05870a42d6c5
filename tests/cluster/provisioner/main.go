// benchrun-hostpath-provisioner: the test cluster's dynamic provisioner (tests/cluster/provisioner.sh).
//
// It watches PersistentVolumeClaims of StorageClasses whose provisioner is benchrun.dev/hostpath
// and, for each, creates a directory ROOT/<pv name> with an ext4 file system of the claim's size
// mounted on it (sparse image ROOT/<pv name>.img through a loop device) and a hostPath
// PersistentVolume on it; when such a PersistentVolume is released and its reclaim policy is
// Delete, it unmounts and removes both (the library then deletes the PersistentVolume object).
//
// Both kubelets of the test cluster run on this one machine and share its filesystem, so a
// directory is reachable from either node. The volume is still pinned (node affinity) to the
// node the scheduler chose for the claim's first pod (WaitForFirstConsumer), as a local disk
// would be, so placement behaves as on a real cluster with node-local storage.
//
// It runs on the host with the admin kubeconfig, one process per cluster (no leader election).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Set on each volume so that Delete touches only directories this provisioner made.
const annRoot = "benchrun.dev/hostpath-root"

type hostPathProvisioner struct {
	root string // absolute, clean
}

func (p *hostPathProvisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := o.PVC
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("benchrun.dev/hostpath provisions only volumeMode Filesystem (a directory), not Block")
	}
	if claim.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("benchrun.dev/hostpath does not support a claim selector")
	}
	size, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil, controller.ProvisioningFinished, errors.New("the claim requests no storage size")
	}
	dir := filepath.Join(p.root, o.PVName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("create %s: %w", dir, err)
	}
	// The claim's size is a real limit: the directory is an ext4 file system of that size, in a
	// sparse image file mounted through a loop device. A bare directory would let one claim
	// fill the machine's disk (and with it etcd's, which stops the cluster). `discard`: blocks
	// the file system frees are punched out of the image, else rewrites would grow the image
	// to the claim's full size however little the volume holds.
	if !mounted(dir) {
		img := dir + ".img"
		f, err := os.OpenFile(img, os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			err = f.Truncate(size.Value())
			f.Close()
		}
		if err != nil {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("create %s: %w", img, err)
		}
		if err := run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", img); err != nil {
			return nil, controller.ProvisioningInBackground, err
		}
		if err := run(ctx, "mount", "-o", "loop,discard", img, dir); err != nil {
			return nil, controller.ProvisioningInBackground, err
		}
	}
	// Writable by any pod user: fsGroup does not apply to hostPath volumes, and the test
	// cluster's pods run as non-root users of their own choosing (restricted Pod Security).
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("chmod %s: %w", dir, err)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	dirType := v1.HostPathDirectory
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.PVName,
			Annotations: map[string]string{annRoot: p.root},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   claim.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType},
			},
		},
	}
	if o.SelectedNodeName != "" {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{o.SelectedNodeName},
			}}}},
		}}
	}
	klog.InfoS("provisioned", "claim", klog.KObj(claim), "volume", o.PVName, "dir", dir, "node", o.SelectedNodeName, "size", size.String())
	return pv, controller.ProvisioningFinished, nil
}

func (p *hostPathProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Annotations[annRoot] != p.root || pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a volume of this provisioner's root " + p.root}
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(dir) != p.root || !strings.HasPrefix(filepath.Base(dir), "pvc-") {
		return fmt.Errorf("refusing to remove %s: not a pvc-* directory directly under %s", dir, p.root)
	}
	if mounted(dir) {
		if err := run(ctx, "umount", dir); err != nil { // a loop mount: its device goes with it
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if err := os.Remove(dir + ".img"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s.img: %w", dir, err)
	}
	klog.InfoS("deleted", "volume", pv.Name, "dir", dir)
	return nil
}

// mounted: whether dir is a mount point (listed in /proc/self/mountinfo).
func mounted(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig of the cluster")
	root := flag.String("root", "", "directory under which each volume gets its own directory")
	name := flag.String("name", "benchrun.dev/hostpath", "provisioner name (a StorageClass's provisioner field)")
	flag.Parse()
	if *kubeconfig == "" || *root == "" {
		fmt.Fprintln(os.Stderr, "usage: benchrun-hostpath-provisioner --kubeconfig FILE --root DIR [--name NAME]")
		os.Exit(2)
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		klog.Fatalf("root %s: %v", *root, err)
	}
	if err := os.MkdirAll(absRoot, 0o755); err != nil {
		klog.Fatalf("create root %s: %v", absRoot, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	// Fail at start, not later in a loop, when the API server cannot be reached.
	if _, err := client.Discovery().ServerVersion(); err != nil {
		klog.Fatalf("cannot reach the API server: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// After tests/cluster/down.sh (which unmounts everything under the cluster's state) the
	// volumes that still exist are mounted again, before any pod can use their directories.
	imgs, _ := filepath.Glob(filepath.Join(absRoot, "pvc-*.img"))
	for _, img := range imgs {
		dir := strings.TrimSuffix(img, ".img")
		if st, err := os.Stat(dir); err == nil && st.IsDir() && !mounted(dir) {
			if err := run(ctx, "mount", "-o", "loop,discard", img, dir); err != nil {
				klog.Fatalf("remount: %v", err)
			}
			klog.InfoS("mounted again", "dir", dir)
		}
	}
	pc := controller.NewProvisionController(ctx, client, *name, &hostPathProvisioner{root: filepath.Clean(absRoot)},
		controller.LeaderElection(false), // one process per cluster, started by provisioner.sh
	)
	klog.InfoS("starting", "provisioner", *name, "root", absRoot)
	pc.Run(ctx)
	klog.InfoS("stopped")
}
