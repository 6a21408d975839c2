package clients

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Jar is a library jar a Java client needs, with the Debian package that installs it.
type Jar struct {
	Path    string
	Package string
}

// CuratorJars are the jars of Apache Curator's recipes and their ZooKeeper client, as Debian's
// libcurator-recipes-java installs them (slf4j-simple logs to the program's stderr, its log).
var CuratorJars = []Jar{
	{"/usr/share/java/curator-recipes.jar", "libcurator-recipes-java"},
	{"/usr/share/java/curator-framework.jar", "libcurator-recipes-java"},
	{"/usr/share/java/curator-client.jar", "libcurator-recipes-java"},
	{"/usr/share/java/zookeeper.jar", "libcurator-recipes-java"},
	{"/usr/share/java/zookeeper-jute.jar", "libcurator-recipes-java"},
	{"/usr/share/java/guava.jar", "libcurator-recipes-java"},
	{"/usr/share/java/slf4j-api.jar", "libcurator-recipes-java"},
	{"/usr/share/java/slf4j-simple.jar", "libslf4j-java"},
}

// jdkPackage is the Debian package that brings javac and java.
const jdkPackage = "default-jdk-headless"

// JavaCommand compiles the shipped Java client name (for example "java/CuratorLock.java") with
// the machine's javac into cacheDir (empty: the user cache directory), unless that exact source
// is compiled there already, and returns the command that runs it. A missing JDK or jar is one
// line naming the Debian package to install.
func JavaCommand(ctx context.Context, cacheDir, name string, jars []Jar) ([]string, error) {
	src, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("no shipped client %s", name)
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, fmt.Errorf("the %s client is compiled with javac, which is not on PATH: install it with `apt-get install %s`", name, jdkPackage)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("the %s client runs with java, which is not on PATH: install it with `apt-get install %s`", name, jdkPackage)
	}
	cp := make([]string, len(jars))
	for i, j := range jars {
		if _, err := os.Stat(j.Path); err != nil {
			return nil, fmt.Errorf("the %s client needs %s: install it with `apt-get install %s`", name, j.Path, j.Package)
		}
		cp[i] = j.Path
	}
	classes, err := compileJava(ctx, cacheDir, name, src, javac, cp)
	if err != nil {
		return nil, err
	}
	class := strings.TrimSuffix(path.Base(name), ".java")
	// A small heap and the quick compiler: ten of these share two cores with the servers.
	// The JVM writes its own warnings to stdout unless told otherwise: they go to stderr, the log,
	// and no hsperfdata file (every program is pid 1 in its own namespace, so they would clash).
	return []string{java, "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xlog:all=warning:stderr",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", strings.Join(append([]string{classes}, cp...), ":"), class}, nil
}

// compileJava compiles src into a directory of cacheDir named by the hash of the source and the
// class path, and returns it. Processes of one run compile at once: a file lock lets one compile
// while the others wait, and the result appears by rename, never half-written.
func compileJava(ctx context.Context, cacheDir, name string, src []byte, javac string, cp []string) (string, error) {
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cacheDir = filepath.Join(base, "lockpick")
	}
	sum := sha256.Sum256(append(append([]byte(nil), src...), strings.Join(cp, ":")...))
	out := filepath.Join(cacheDir, "java-"+strings.TrimSuffix(path.Base(name), ".java")+"-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("java client cache: %w", err)
	}
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("java client cache: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("java client cache lock: %w", err)
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil // compiled by another process while this one waited
	}
	tmp, err := os.MkdirTemp(cacheDir, ".javac-*")
	if err != nil {
		return "", fmt.Errorf("java client cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, path.Base(name))
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return "", fmt.Errorf("java client source: %w", err)
	}
	classes := filepath.Join(tmp, "classes")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, javac, "-nowarn", "-d", classes, "-cp", strings.Join(cp, ":"), file)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compile %s with %s: %w: %s", name, javac, err, firstLine(msg))
	}
	if err := os.Rename(classes, out); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("java client cache: %w", err)
	}
	return out, nil
}

// firstLine is the first line of a compiler's output, for a one-line error.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
