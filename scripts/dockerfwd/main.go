// Command dockerfwd exposes the local Docker Engine's unix socket on a loopback TCP port, so that
// lockpick reaches this machine's Engine as a remote one (--docker-host tcp://127.0.0.1:PORT):
// the remote code path, without a second machine. It prints the address and serves until killed.
//
//	go run ./scripts/dockerfwd [-socket /var/run/docker.sock] [-listen 127.0.0.1:0]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockpick-dev/lockpick/containers"
)

func main() {
	socket := flag.String("socket", "/var/run/docker.sock", "the Engine's unix socket")
	listen := flag.String("listen", "127.0.0.1:0", "the TCP address to serve on")
	flag.Parse()
	fw, err := containers.Forward(*socket, *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dockerfwd:", err)
		os.Exit(255)
	}
	fmt.Println(fw.Host())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	fw.Close()
}
