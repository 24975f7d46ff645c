package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// roleEnv names the environment variable that turns the gwload binary into
// one of its child processes: "engine", "gateway" or "pool". The driver
// re-executes its own binary, so that the gateway, the engines and the load
// generator each burn CPU in a process of their own and /proc tells their
// shares apart.
const roleEnv = "GWLOAD_ROLE"

// argEnv carries a child's JSON arguments.
const argEnv = "GWLOAD_ARGS"

// child is a running child process. It prints one JSON line when ready,
// then takes commands on stdin (one per line) and answers each with one
// JSON line; closing stdin stops it.
type child struct {
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	ready json.RawMessage
}

// startChild runs exe ("" re-executes this binary) as role with args
// (JSON) and waits for its ready line.
func startChild(exe, name, role string, args any, extraEnv ...string) (*child, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, argEnv+"="+string(a))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: no ready line: %w", name, err)
	}
	c.ready = json.RawMessage(line)
	return c, nil
}

// call sends one command line and decodes the JSON answer into v (nil:
// discard).
func (c *child) call(cmd string, v any) error {
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%s: %q: %w", c.name, cmd, err)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(line, v)
}

// stop closes the child's stdin and waits for it to exit (killing it after
// 30 s).
func (c *child) stop() error {
	_ = c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return errors.Join(fmt.Errorf("%s did not stop within 30 s; killed", c.name), <-done)
	}
}

// clockTicks is Linux's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat; it is 100 on every architecture Go supports.
const clockTicks = 100

// procCPU returns the user + system CPU time a process has used, from
// /proc/<pid>/stat ("self" for this process).
func procCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces;
	// the fields after its closing parenthesis start at field 3 (state).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// cpuOf returns the CPU time of the child (0 and the error when /proc
// cannot tell).
func (c *child) cpu() (time.Duration, error) { return procCPU(strconv.Itoa(c.cmd.Process.Pid)) }

// rssBytes returns a process's resident set size from /proc/<pid>/status.
func rssBytes(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%s/status: no VmRSS", pid)
}
