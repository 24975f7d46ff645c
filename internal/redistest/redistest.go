package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testport"
)

// Binary is the redis-server the tests run.
const Binary = "/usr/bin/redis-server"

// EnvRequire names the variable that turns a missing redis-server into a
// test failure instead of a skip.
const EnvRequire = "KVROUTE_REQUIRE_REDIS"

// StartTimeout bounds how long Start waits for the server to answer PING.
var StartTimeout = 20 * time.Second

// Available reports why redis-server cannot be run (nil when it can).
func Available() error {
	if _, err := os.Stat(Binary); err != nil {
		return fmt.Errorf("redistest: %s not found (install redis-server): %w", Binary, err)
	}
	return nil
}

// Require skips t when redis-server is missing, or fails it when
// KVROUTE_REQUIRE_REDIS=1.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if requireSet() {
			t.Fatalf("%v (%s=1)", err, EnvRequire)
		}
		t.Skipf("redis test skipped: %v", err)
	}
}

func requireSet() bool { return os.Getenv(EnvRequire) == "1" }

// Server is a running redis-server owned by one test.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// Port is the loopback port, kept across Restart.
	Port int

	dir    string
	extra  []string // more redis-server arguments
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a redis-server for t (skipping or failing as Require does) and
// stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	Require(t)
	s := &Server{dir: t.TempDir()}
	var err error
	for attempt := 0; attempt < 5; attempt++ { // another process may take the free port first
		if s.Port, err = testport.Find(testport.Options{}); err != nil {
			break
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("already running")
	}
	cmd := exec.Command(Binary, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--protected-mode", "yes")
	cmd.Args = append(cmd.Args, s.extra...)
	out, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", Binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(StartTimeout)
	for {
		if err := ping(s.Addr); err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited: %s", s.Port, strings.TrimSpace(s.readLog()))
		case <-time.After(20 * time.Millisecond): // polling the server's readiness, not synchronizing test logic
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %s", s.Port, StartTimeout, s.readLog())
		}
	}
}

// ping sends a RESP PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop kills the server (SIGKILL: what an outage looks like to clients) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	<-exited
	return nil
}

// Restart starts a fresh, empty server on the same port after Stop.
func (s *Server) Restart() error {
	var err error
	deadline := time.Now().Add(StartTimeout)
	for { // the kernel may hold the port briefly after the old server died
		if err = s.start(); err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // retrying a bind, not synchronizing test logic
	}
}

// Output returns what the server printed so far, for failure messages.
func (s *Server) Output() string { return s.readLog() }

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *Server) readLog() string {
	b, _ := os.ReadFile(s.logPath())
	return string(b)
}
