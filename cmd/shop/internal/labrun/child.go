package labrun

// Crash scenarios need a shop that really dies. A crash point sends SIGKILL to its own
// process, so the lab cannot run that shop inside itself: it runs the gateway here, and the
// shop as a child process — the shop program, `shop lab shop` — which kills itself at the
// crash point, mid-request, exactly as in the crash drills. A Restart step starts it again on
// the same address and the same database, without the crash point.
//
// The address stays the same because the lab opens the shop's listening socket itself and
// keeps it open for the stack's whole life; every shop process it starts inherits a
// duplicate of it as file descriptor 3 (exec.Cmd.ExtraFiles) and serves on that. No port is
// picked, released and bound again, so no other program can take it in between; while the
// shop is down, connections wait in the socket's queue for the next process.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"gorm.io/gorm"

	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// listenerFD is the file descriptor on which a lab shop finds its listener: the first of
// exec.Cmd.ExtraFiles, after stdin, stdout and stderr.
const listenerFD = 3

// serveChild is `shop lab shop [--off SWITCH]`: one crash scenario's shop in the foreground,
// configured by the environment like `serve`, serving on the listener its parent handed it,
// with at most one protection off. Only the lab starts it; like every lab stack it announces
// itself loudly if a protection is off.
func (r *Runner) serveChild(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("shop lab shop", flag.ContinueOnError)
	fs.SetOutput(stdout)
	off := fs.String("off", "", "the one protection to turn off: "+strings.Join(switchNames(), ", "))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: shop lab shop [--off SWITCH]\n\n"+
			"A crash scenario's shop: `shop lab run` starts it as a child process, handing it its listener\n"+
			"on file descriptor 3, and configures it with the environment, like serve.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := payments.Protections{Off: payments.Switch(*off)}
	if err := p.Check(); err != nil {
		return err
	}
	getenv := r.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := r.Config(getenv)
	if err != nil {
		return err
	}
	f := os.NewFile(listenerFD, "lab listener")
	cfg.Listener, err = net.FileListener(f)
	f.Close() // FileListener made its own copy
	if err != nil {
		return fmt.Errorf("lab shop: no listener on file descriptor %d (the lab starts this command itself): %w", listenerFD, err)
	}
	cfg.Protections, cfg.Lab, cfg.LogOutput = p, r, stdout
	st, err := stack.Start(ctx, cfg, r.Wire)
	if err != nil {
		return err
	}
	return errors.Join(st.Wait(ctx), st.Close())
}

func switchNames() []string {
	var names []string
	for _, s := range payments.Switches {
		if s != payments.SwitchClientSameKey {
			names = append(names, string(s))
		}
	}
	return names
}

// Child is a shop running as a child process on a listener this process holds.
type Child struct {
	url  string
	exe  string
	args []string
	env  []string // the child's whole environment, without the crash point
	ln   *net.TCPListener
	out  *output

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has ended, at ended
	ended time.Time
}

// startChild starts exe with args and env on ln, with crashAt as its crash point ("" for
// none), and waits until it answers /healthz. Lines that announce a lab stack are copied to
// log.
func startChild(ctx context.Context, exe string, args, env []string, ln *net.TCPListener, crashAt string, log io.Writer) (*Child, error) {
	c := &Child{url: "http://" + ln.Addr().String(), exe: exe, args: args, env: env, ln: ln,
		out: &output{log: log, keep: true}}
	return c, c.start(ctx, crashAt)
}

// URL is the shop's base URL; it stays the same across restarts.
func (c *Child) URL() string { return c.url }

// Output is everything the child's processes have printed so far.
func (c *Child) Output() string { return c.out.String() }

func (c *Child) start(ctx context.Context, crashAt string) error {
	f, err := c.ln.File() // a duplicate of the listening socket, for the child
	if err != nil {
		return fmt.Errorf("hand the listener to the lab shop: %w", err)
	}
	defer f.Close() // the child has its own once it has started
	cmd := exec.Command(c.exe, c.args...)
	cmd.Env = append(slices.Clone(c.env), "SHOP_CRASH_AT="+crashAt)
	cmd.ExtraFiles = []*os.File{f} // listenerFD in the child
	// Not *os.File writers: exec copies the output in goroutines that Wait waits for, so once
	// the process has ended its last words (the crash point it reached) are in c.out.
	cmd.Stdout, cmd.Stderr = c.out, c.out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the lab shop: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its end is judged from cmd.ProcessState
		c.mu.Lock()
		c.ended = time.Now().UTC()
		c.mu.Unlock()
		close(done)
	}()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()

	probe := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if res, err := probe.Get(c.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("the lab shop exited before it was ready:\n%s", c.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("the lab shop was not ready within 30s")
}

// Restart waits for the shop to have died at its crash point — killed by SIGKILL, after
// saying which crash point it reached — then starts it again without one, on the same
// listener. It returns when the shop died.
func (c *Child) Restart(ctx context.Context) (time.Time, error) {
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
	if !strings.Contains(c.Output(), "SHOP_CRASH_AT=") {
		return died, fmt.Errorf("the lab shop was killed, but not at a crash point:\n%s", c.Output())
	}
	return died, c.start(ctx, "")
}

// Stop asks the shop to shut down (SIGTERM) and waits for it, killing it after 15s.
func (c *Child) Stop() {
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

// output keeps what a lab stack prints, if keep, and copies to log the lines in which it
// announces itself: that a protection is off, that a crash point was reached. Those lines
// are for the person running the lab; nothing else reads a stack's log.
type output struct {
	log  io.Writer // nil: announce nothing
	keep bool

	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte // the start of a line not yet ended
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keep {
		o.all.Write(p)
	}
	if o.log == nil {
		return len(p), nil
	}
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		line := o.partial[:i+1]
		if bytes.Contains(line, []byte("FAILURE LAB STACK")) || bytes.Contains(line, []byte("SHOP_CRASH_AT=")) {
			o.log.Write(line)
		}
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all.String()
}

// CrashStack is a stack whose shop can really die: the fake gateway runs in this process,
// the shop as a child process on a listener this process keeps, so that the shop can be
// killed and started again on the same address and database.
type CrashStack struct {
	Gateway *stack.Gateway
	Shop    *Child
	// DB is a second handle on the shop's database, to look at what the shop left behind.
	DB      *gorm.DB
	APIKeys map[string]string
	// ControlToken is the gateway's control token.
	ControlToken string

	exe    string
	args   []string
	env    []string
	log    io.Writer
	dir    string
	lns    []*net.TCPListener
	others []*Child
}

// StartCrashStack starts a crash scenario's stack: the gateway here, the shop as a child
// process (Exe) with crashAt as its crash point ("" for none) and the protection off turned
// off ("" for none). extra is added to the lab's environment.
func (r *Runner) StartCrashStack(ctx context.Context, off payments.Switch, crashAt string, extra map[string]string) (*CrashStack, error) {
	exe, err := r.exe()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "checkoutlab-lab-")
	if err != nil {
		return nil, err
	}
	s := &CrashStack{exe: exe, args: []string{"lab", "shop"}, log: r.Log, dir: dir}
	if off != "" {
		s.args = append(s.args, "--off", string(off))
	}
	if err := s.start(ctx, r, crashAt, extra); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *CrashStack) start(ctx context.Context, r *Runner, crashAt string, extra map[string]string) error {
	env, cfg, err := r.labConfig(s.dir, extra)
	if err != nil {
		return err
	}
	s.APIKeys, s.ControlToken = cfg.APIKeys, cfg.GatewayControlToken
	// Every shop process of the stack signs with one key, so that a browser's session and its
	// order links outlive a crash and a restart, as they do for a shop restarted on its DATA_DIR.
	env["SHOP_SECRET"] = rand.Text() + rand.Text()
	ln, err := s.listen()
	if err != nil {
		return err
	}
	// The gateway delivers webhooks to the shop's address, which outlives every process.
	cfg.ShopPublicURL = "http://" + ln.Addr().String()
	if s.Gateway, err = stack.StartGateway(ctx, cfg, stack.NewLogger(nil, "")); err != nil {
		return err
	}
	env["GATEWAY_URL"] = s.Gateway.URL()

	// The child's environment is built from scratch: a variable of the shop that runs the
	// lab (SHOP_PUBLIC_URL, say) must not leak into the lab's own shop.
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		s.env = append(s.env, k+"="+env[k])
	}
	if s.Shop, err = startChild(ctx, s.exe, s.args, s.env, ln, crashAt, s.log); err != nil {
		return err
	}
	s.DB, err = models.Open(ctx, cfg.DatabaseURL, cfg.DataDir, "shop.db")
	return err
}

func (s *CrashStack) listen() (*net.TCPListener, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	s.lns = append(s.lns, ln)
	return ln, nil
}

// Restart waits for the shop to have died at its crash point and starts it again without
// one (Child.Restart). It returns when the shop died.
func (s *CrashStack) Restart(ctx context.Context) (time.Time, error) { return s.Shop.Restart(ctx) }

// StartShop starts another shop process on the same database and gateway, without a crash
// point, on an address of its own. The gateway keeps delivering webhooks to the first.
func (s *CrashStack) StartShop(ctx context.Context) (*Child, error) {
	ln, err := s.listen()
	if err != nil {
		return nil, err
	}
	c, err := startChild(ctx, s.exe, s.args, s.env, ln, "", s.log)
	s.others = append(s.others, c)
	return c, err
}

// Close stops the shop processes, the gateway and the listeners, and deletes the stack's
// temporary files.
func (s *CrashStack) Close() {
	if s.DB != nil {
		models.Close(s.DB)
	}
	for _, c := range append(s.others, s.Shop) {
		if c != nil {
			c.Stop()
		}
	}
	if s.Gateway != nil {
		s.Gateway.Close()
	}
	for _, ln := range s.lns {
		ln.Close()
	}
	os.RemoveAll(s.dir)
}

// startCrashTarget starts a crash scenario's stack as a run's target.
func (r *Runner) startCrashTarget(ctx context.Context, p payments.Protections, crashAt string) (*target, error) {
	s, err := r.StartCrashStack(ctx, p.Off, crashAt, nil)
	if err != nil {
		return nil, err
	}
	client, closeIdle := newHTTPClient()
	return &target{shop: s.Shop.URL(), gateway: s.Gateway.URL(), apiKeys: s.APIKeys, controlToken: s.ControlToken,
		db: s.DB, http: client,
		restart: s.Restart, crashAt: crashAt, keepsNoKeys: !p.On(payments.SwitchServerIdempotency),
		// Longer than a plain stack's: a receipt job the killed shop had taken runs again only
		// once the new shop leads the job queue (the dead leader's term lasts 15 s) and the
		// rescuer finds it (JOB_RESCUE_AFTER).
		settleWithin: 45 * time.Second,
		close: func() {
			closeIdle()
			s.Close()
		}}, nil
}

// exe is the shop program crash scenarios run. Under `go test` os.Executable() is the test
// binary, which would run the tests again rather than be a shop: tests must give Exe.
func (r *Runner) exe() (string, error) {
	if r.Exe != "" {
		return r.Exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the shop program to run the lab shop: %w", err)
	}
	if strings.HasSuffix(exe, ".test") {
		return "", fmt.Errorf("%s is a test binary, not the shop: give the lab the shop program (Runner.Exe)", exe)
	}
	return exe, nil
}
