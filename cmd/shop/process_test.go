package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tests in this file run the real binaries as child processes, so a crash is a real crash:
// the kernel kills the shop with SIGKILL at the crash point, mid-request, with no deferred
// cleanup, and a new process starts on the same database.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// mustBinaries builds cmd/shop and cmd/fakegateway once per test run and returns their paths.
func mustBinaries(tb testing.TB) (shop, gateway string) {
	tb.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "checkoutlab-bin-")
		if buildErr != nil {
			return
		}
		for _, pkg := range []string{"checkoutlab/cmd/shop", "checkoutlab/cmd/fakegateway"} {
			out, err := exec.Command("go", "build", "-o", binDir, pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(binDir, "shop"), filepath.Join(binDir, "fakegateway")
}

func TestMain(m *testing.M) {
	if os.Getenv(labChildEnv) != "" {
		// A crash scenario of the failure lab runs os.Executable() — under go test, this
		// binary — as its shop: be the shop, not the tests.
		main()
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// freeAddr returns a loopback address with a port that was free a moment ago. The shop's
// address must be known before the gateway starts, because the gateway delivers webhooks there.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Process is a running child process.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// MustStartProcess starts bin with env (on top of this process's environment) and waits until
// url answers 200. The process is stopped when the test ends; its output is logged on failure.
func MustStartProcess(tb testing.TB, name, bin string, env map[string]string, url string) *Process {
	tb.Helper()
	p := &Process{name: name, cmd: exec.Command(bin), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = os.Environ()
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("--- output of %s:\n%s", name, p.out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			tb.Fatalf("%s exited before it was ready: %v\n%s", name, p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready after 30s\n%s", name, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop asks the process to shut down (SIGTERM) and waits for it.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// MustBeKilled waits for the process to die and checks that SIGKILL killed it.
func (p *Process) MustBeKilled(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		tb.Fatalf("%s is still running, want it killed at its crash point", p.name)
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		tb.Fatalf("%s ended with %v, want killed by a signal", p.name, p.err)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		tb.Fatalf("%s ended with %v, want killed by SIGKILL", p.name, p.err)
	}
	if !strings.Contains(p.out.String(), "SHOP_CRASH_AT=") {
		tb.Fatalf("%s died, but not at a crash point:\n%s", p.name, p.out.String())
	}
}
