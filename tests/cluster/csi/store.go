package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
)

// The images of one plugin: ROOT/volumes/<id>.img and ROOT/snapshots/<id>.img, and the node a
// volume is published to (ControllerPublishVolume) in ROOT/attachments/<id>. An id is the name
// the sidecar gave (pvc-<uid>, snapshot-<uid>), so a retried create finds its image. The
// controller and every node's plugin share ROOT (one machine), as a real driver's would share
// its storage system's state.
type store struct {
	root  string
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func openStore(root string) (*store, error) {
	for _, d := range []string{"volumes", "snapshots", "attachments"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o750); err != nil {
			return nil, err
		}
	}
	return &store{root: root, locks: map[string]*sync.Mutex{}}, nil
}

// lock one id (a volume or snapshot) for the length of an operation on it: two calls for one
// name (a sidecar's retry) never race, calls for different names run in parallel.
func (s *store) lock(id string) func() {
	s.mu.Lock()
	l, ok := s.locks[id]
	if !ok {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (s *store) volume(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", errorf(codes.InvalidArgument, "volume id %q: want [A-Za-z0-9._-], at most 128", id)
	}
	return filepath.Join(s.root, "volumes", id+".img"), nil
}

func (s *store) snapshot(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", errorf(codes.InvalidArgument, "snapshot id %q: want [A-Za-z0-9._-], at most 128", id)
	}
	return filepath.Join(s.root, "snapshots", id+".img"), nil
}

// attachedTo: the node volume id is published to, or "" when none.
func (s *store) attachedTo(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", errorf(codes.InvalidArgument, "volume id %q: want [A-Za-z0-9._-], at most 128", id)
	}
	b, err := os.ReadFile(filepath.Join(s.root, "attachments", id))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", errorf(codes.Internal, "%v", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// setAttached records volume id published to node, or none when node is "" (through a
// temporary name, so a reader never sees half a record).
func (s *store) setAttached(id, node string) error {
	path := filepath.Join(s.root, "attachments", id)
	if node == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errorf(codes.Internal, "%v", err)
		}
		return nil
	}
	if err := os.WriteFile(path+".tmp", []byte(node+"\n"), 0o600); err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	return rename(path+".tmp", path)
}

// size of an image, or codes.NotFound.
func size(path string) (int64, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, errorf(codes.NotFound, "%s does not exist", filepath.Base(path))
	}
	if err != nil {
		return 0, errorf(codes.Internal, "%v", err)
	}
	return st.Size(), nil
}

// run a command; its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return errorf(codes.Internal, "%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeImage writes an empty ext4 of `bytes` at path (through a temporary name, so a crash
// leaves no half-made volume under the final name).
func makeImage(path string, bytes int64) error {
	tmp := path + ".tmp"
	if err := os.Truncate(tmp, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errorf(codes.Internal, "%v", err)
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	err = f.Truncate(bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", tmp); err != nil {
		return err
	}
	return rename(tmp, path)
}

// copyImage copies src to path (sparse: the blocks written, not the size), then grows it to
// `bytes` when that is larger.
func copyImage(src, path string, bytes int64) error {
	tmp := path + ".tmp"
	if err := run("cp", "--sparse=always", src, tmp); err != nil {
		return err
	}
	if err := grow(tmp, bytes); err != nil {
		return err
	}
	return rename(tmp, path)
}

func rename(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	return nil
}

// grow an image to `bytes` and its file system with it: through its loop device when one is
// attached (a mounted volume, online), else on the image itself (offline, after the e2fsck
// that resize2fs demands); bytes <= 0 leaves it as it is. The file system is resized even when
// the image already has the size (a retry after a failed resize2fs: one of a file system that
// already fills its image does nothing). An online resize needs CAP_SYS_RESOURCE (the ext4
// resize ioctl's check): without it a mounted volume is refused, unchanged, with
// FailedPrecondition, the CSI spec's answer of a driver that expands offline only.
func grow(path string, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	have, err := size(path)
	if err != nil {
		return err
	}
	dev, err := loopOf(path)
	if err != nil {
		return err
	}
	if dev != "" && !onlineResize() {
		return errorf(codes.FailedPrecondition, "%s is in use (%s): this plugin expands it offline only on this machine (an online ext4 resize needs CAP_SYS_RESOURCE, which the plugin lacks)", filepath.Base(path), dev)
	}
	if have < bytes {
		if err := os.Truncate(path, bytes); err != nil {
			return errorf(codes.Internal, "%v", err)
		}
	}
	if dev != "" {
		if err := run("losetup", "-c", dev); err != nil {
			return err
		}
		return run("resize2fs", dev)
	}
	// e2fsck -p exits 1 when it corrected something; only above that is the file system bad.
	if out, err := exec.Command("e2fsck", "-f", "-p", path).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() > 1 {
			return errorf(codes.Internal, "e2fsck %s: %v: %s", path, err, strings.TrimSpace(string(out)))
		}
	}
	return run("resize2fs", path)
}

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/self/status's CapEff.
const capSysResource = 24

// onlineResize: whether this process may resize a mounted ext4 (CAP_SYS_RESOURCE in its
// effective set; a container's root may lack it).
func onlineResize() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// loopOf: the loop device backing path, or "".
func loopOf(path string) (string, error) {
	out, err := exec.Command("losetup", "-n", "-O", "NAME", "-j", path).Output()
	if err != nil {
		return "", errorf(codes.Internal, "losetup -j %s: %v", path, err)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

// mounted: whether path is a mount point (from /proc/self/mountinfo, whose 5th field is it).
func mounted(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescape(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescape mountinfo's octal escapes (\040 for a space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
