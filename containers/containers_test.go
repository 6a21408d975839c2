package containers

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
)

func TestLddPaths(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffc)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f32)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f32)\n" +
		"\tlibmissing.so => not found\n"
	got := lddPaths(out)
	want := []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if !slices.Equal(got, want) {
		t.Fatalf("lddPaths = %v, want %v", got, want)
	}
}

// An owner is alive while its process runs with the start time recorded; a pid the kernel gave to
// another process, a dead one and a malformed label are not.
func TestOwnerAlive(t *testing.T) {
	if !ownerAlive(Owner()) {
		t.Fatalf("this process (%s) is not taken for alive", Owner())
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	// A zombie: dead, not yet reaped (a lockpick killed by SIGKILL, its parent not done with it).
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Skip(err)
	}
	defer zombie.Wait()
	for deadline := time.Now().Add(5 * time.Second); procStart(zombie.Process.Pid) != ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a dead, unreaped process (a zombie) is taken for a running one")
		}
	}
	host, _ := os.Hostname()
	for _, owner := range []string{
		host + "/" + itoa(cmd.Process.Pid) + "/12345", // exited
		host + "/" + itoa(os.Getpid()) + "/1",         // our pid, another start time
		"garbage", "",
	} {
		if ownerAlive(owner) {
			t.Errorf("owner %q taken for alive", owner)
		}
	}
	if !ownerAlive("another-host/1/1") {
		t.Error("an owner on another host cannot be checked and must count as alive")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A dry run sees the containers it would remove still there; their images must count as free all
// the same, or the dry run leaves out an image the real clean then removes.
func TestImagesInUseLeavesOutRemovedContainers(t *testing.T) {
	cs := []container.Summary{
		{ID: "dead", ImageID: "sha256:old"},
		{ID: "live", ImageID: "sha256:new"},
	}
	used := imagesInUse(cs, map[string]bool{"dead": true})
	if used["sha256:old"] || !used["sha256:new"] {
		t.Fatalf("imagesInUse = %v, want only sha256:new (the dead container is being removed)", used)
	}
	if used := imagesInUse(cs, nil); !used["sha256:old"] || !used["sha256:new"] {
		t.Fatalf("imagesInUse with nothing removed = %v, want both images", used)
	}
}
