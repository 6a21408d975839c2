package sshhost

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Quote makes any string one shell word: checked by a real shell.
func TestQuoteIsOneShellWord(t *testing.T) {
	for _, s := range []string{"", "plain", "two words", "it's", `"$HOME"`, "a;b|c&d", "back\\slash", "new\nline", "*?[x]"} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: the shell printed %q (%v)", s, Quote(s), out, err)
		}
	}
}

// testHosts makes n namespace hosts with scripts/ssh-hosts.sh (root only) and removes them after.
func testHosts(t *testing.T, n int) (addrs []string, key, known string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("namespace hosts need root")
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("no sshd: apt-get install openssh-server (scripts/install-deps.sh does)")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "ssh-hosts.sh")
	// The namespaces' names are fixed: a test of another package using them waits for this one.
	lock, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "LOCKPICK_SSH_DIR="+filepath.Join(dir, "hosts"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-hosts.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("up", "1")
	t.Cleanup(func() { run("down") })
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(run("env")))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		env[k] = v
	}
	return strings.Split(env["LOCKPICK_SSH_HOSTS"], ","), env["LOCKPICK_SSH_KEY"], env["LOCKPICK_SSH_KNOWN_HOSTS"]
}

// Against a real sshd in a namespace: commands and their failures, uploads, a detached process
// that outlives its session and stops on a signal, and host keys that are checked, never accepted.
func TestHostOverRealSSH(t *testing.T) {
	addrs, key, known := testHosts(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key, KnownHosts: known})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	if out, err := h.Run(ctx, "ip -o -4 addr show eth0"); err != nil || !strings.Contains(string(out), addrs[0]+"/") {
		t.Fatalf("ran on the wrong host or not at all: %q %v", out, err)
	}
	if _, err := h.Run(ctx, "echo oops >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("a failing command: %v", err)
	}

	dir := t.TempDir() // the namespace shares this machine's filesystem; the host writes it over SSH
	path := filepath.Join(dir, "it's a file")
	if err := h.Upload(ctx, path, 0o640, strings.NewReader("hello\n")); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Run(ctx, "cat "+Quote(path)+" && stat -c %a "+Quote(path)); err != nil || string(out) != "hello\n640\n" {
		t.Fatalf("uploaded file reads %q (%v)", out, err)
	}

	pid, err := h.Start(ctx, dir, filepath.Join(dir, "sleep.log"), []string{"GREETING=hi there"}, []string{"sh", "-c", `echo "$GREETING"; exec sleep 600`})
	if err != nil {
		t.Fatal(err)
	}
	h.Close() // the process must outlive the session that started it
	if h, err = Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key, KnownHosts: known}); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if alive, err := h.Alive(ctx, pid); err != nil || !alive {
		t.Fatalf("pid %d after its session ended: alive %v (%v)", pid, alive, err)
	}
	if err := h.Signal(ctx, pid, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive, _ := h.Alive(ctx, pid); alive; alive, _ = h.Alive(ctx, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d survived SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "sleep.log")); string(log) != "hi there\n" {
		t.Fatalf("the process's log reads %q", log)
	}

	// Host keys: a pinned fingerprint that matches logs in, one that does not is refused, and a host
	// missing from known_hosts is refused with the fix.
	pub, err := os.ReadFile(filepath.Join(filepath.Dir(known), "lp-h1", "host_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if h2, err := Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key, Fingerprint: ssh.FingerprintSHA256(hostKey)}); err != nil {
		t.Fatalf("pinned fingerprint refused: %v", err)
	} else {
		h2.Close()
	}
	if _, err := Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key, Fingerprint: "SHA256:AAAA"}); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("a wrong fingerprint: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	if _, err := Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key, KnownHosts: empty}); err == nil || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Fatalf("an unknown host: %v", err)
	}
	if _, err := Dial(ctx, Config{Addr: addrs[0], User: "root", KeyFile: key}); err == nil || !strings.Contains(err.Error(), "known_hosts") {
		t.Fatalf("no way to check the host key: %v", err)
	}
}
