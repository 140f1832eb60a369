package main

// Crash scenarios need a shop that really dies. A crash point sends SIGKILL to its own
// process, so the lab cannot run that shop inside itself: it runs the gateway here, and the
// shop as a child process — this very program, `shop lab shop` — which kills itself at the
// crash point, mid-request, exactly as in the crash drills. A Restart step starts it again on
// the same address and the same database, without the crash point.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// labChildEnv marks a lab child process. A test binary (which is what os.Executable names
// under `go test`) checks it in TestMain and runs main() instead of the tests.
const labChildEnv = "CHECKOUTLAB_LAB_CHILD"

// runLabShop is `shop lab shop [--off SWITCH]`: one lab shop in the foreground, configured by
// the environment like `serve`, with at most one protection off. Only the lab's crash
// scenarios start it; like every lab stack it announces itself loudly if a protection is off.
func runLabShop(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("lab shop", flag.ContinueOnError)
	off := fs.String("off", "", "the one protection to turn off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(nil, os.Getenv, stdout)
	if err != nil {
		return err
	}
	cfg.protections = payments.Protections{Off: payments.Switch(*off)}
	if err := cfg.protections.Check(); err != nil {
		return err
	}
	return start(ctx, "serve", cfg, stdout)
}

// childShop is a lab shop running as a child process.
type childShop struct {
	addr string   // fixed across restarts: the gateway delivers webhooks there
	env  []string // the child's environment, without the crash point
	off  payments.Switch
	logw io.Writer

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has ended, at ended
	ended time.Time
}

// startCrashStack starts the gateway in this process and the shop as a child process that
// dies at crashAt. The shop's database is DATA_DIR/shop.db or databaseURL, as for any stack.
func startCrashStack(ctx context.Context, databaseURL string, p payments.Protections, crashAt string, logw io.Writer) (*labStack, error) {
	dir, err := os.MkdirTemp("", "checkoutlab-lab-")
	if err != nil {
		return nil, err
	}
	shopAddr, err := freeLoopbackAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	env := map[string]string{"DATA_DIR": dir, "DATABASE_URL": databaseURL, "SHOP_ADDR": shopAddr}
	for k, v := range labEnv {
		if k != "SHOP_ADDR" {
			env[k] = v
		}
	}
	cfg, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	var background sync.WaitGroup
	gatewayURL, err := startGateway(ctx, cfg, slog.New(slog.DiscardHandler), &background)
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	env["GATEWAY_URL"] = gatewayURL

	// The child's environment is built from scratch: a variable of the shop that runs the
	// lab (SHOP_PUBLIC_URL, say) must not leak into the lab's own shop.
	child := &childShop{addr: shopAddr, off: p.Off, logw: logw, env: []string{labChildEnv + "=1"}}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			child.env = append(child.env, k+"="+v)
		}
	}
	for k, v := range env {
		child.env = append(child.env, k+"="+v)
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	st := &labStack{shop: "http://" + shopAddr, gateway: gatewayURL, apiKeys: cfg.APIKeys,
		http: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		// Longer than a plain stack's: a receipt job the killed shop had taken runs again only
		// once the new shop leads the job queue (the dead leader's term lasts 15 s) and the
		// rescuer finds it (JOB_RESCUE_AFTER).
		settleWithin: 45 * time.Second}
	st.stop = func() {
		if st.db != nil {
			models.Close(st.db)
		}
		transport.CloseIdleConnections()
		child.stop()
		cancel()
		background.Wait()
		os.RemoveAll(dir)
	}
	st.restart, st.crashAt = child.restart, crashAt
	if err := child.start(ctx, crashAt); err != nil {
		st.stop()
		return nil, err
	}
	if st.db, err = models.Open(ctx, databaseURL, dir, "shop.db"); err != nil {
		st.stop()
		return nil, err
	}
	return st, nil
}

// start runs the child, with crashAt as its crash point ("" for none), and waits until it
// answers /healthz.
func (c *childShop) start(ctx context.Context, crashAt string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run the lab shop: %w", err)
	}
	args := []string{"lab", "shop"}
	if c.off != "" {
		args = append(args, "--off", string(c.off))
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append([]string{}, c.env...), "SHOP_CRASH_AT="+crashAt)
	out := &strings.Builder{}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the lab shop: %w", err)
	}
	done := make(chan struct{})
	var outMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "FAILURE LAB STACK") || strings.Contains(line, "SHOP_CRASH_AT=") {
				fmt.Fprintln(c.logw, line)
			}
			outMu.Lock()
			out.WriteString(line + "\n")
			outMu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		cmd.Wait()
		c.mu.Lock()
		c.ended = time.Now().UTC()
		c.mu.Unlock()
		pw.Close()
		close(done)
	}()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()

	probe := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if res, err := probe.Get("http://" + c.addr + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			outMu.Lock()
			defer outMu.Unlock()
			return fmt.Errorf("the lab shop exited before it was ready:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("the lab shop was not ready within 30s")
}

// restart waits for the child to have died at its crash point (killed by SIGKILL, not
// stopped), then starts it again without one. It returns when the child died.
func (c *childShop) restart(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		return time.Time{}, errors.New("the lab shop did not crash at its crash point within 15s")
	}
	c.mu.Lock()
	died := c.ended
	c.mu.Unlock()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return died, fmt.Errorf("the lab shop ended with %v, want killed by SIGKILL at its crash point", cmd.ProcessState)
	}
	return died, c.start(ctx, "")
}

// stop asks the child to shut down (SIGTERM) and waits for it, killing it after 15s.
func (c *childShop) stop() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// freeLoopbackAddr returns a loopback address whose port was free a moment ago. A crashing
// shop needs a fixed address: the gateway delivers webhooks there, before and after a restart.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
