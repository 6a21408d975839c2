package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/results/browse"
)

func newServeCmd() *cobra.Command {
	var store, addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Browse the run store in a web browser",
		Long: `serve shows the store as web pages: the runs newest first, each linked by its name, with its
verdict and the findings that made it, filters by lock, nemesis and verdict; a page per run with its
plan, its report and its files; and the report cards. Times show in the browser's time zone. It
binds to the loopback address unless told otherwise, serves only files inside the store, and runs
until interrupted (Ctrl-C).`,
		Example: "  lockpick serve\n  lockpick serve --store /data/lockpick --addr 127.0.0.1:9000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			srv, err := browse.New(store)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w (choose another with --addr)", addr, err)
			}
			if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not a loopback address: anyone who can reach it can read the store\n", host)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s on http://%s/ (Ctrl-C to stop)\n", store, ln.Addr())
			return serveUntilDone(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&store, "store", "store", "directory of the run store")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port)")
	return cmd
}

// serveUntilDone serves h on ln until ctx ends, then lets requests in flight finish.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
