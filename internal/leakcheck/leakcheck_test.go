package leakcheck

import (
	"fmt"
	"testing"
	"time"
)

type fakeT struct{ failed bool }

func (f *fakeT) Helper()                        {}
func (f *fakeT) Errorf(format string, a ...any) { f.failed = true; _ = fmt.Sprintf(format, a...) }

func TestCheckDetectsLeak(t *testing.T) {
	old := Timeout
	Timeout = 200 * time.Millisecond
	defer func() { Timeout = old }()
	ft := &fakeT{}
	done := Check(ft)
	stop := make(chan struct{})
	go func() { <-stop }()
	done()
	close(stop)
	if !ft.failed {
		t.Fatal("a goroutine blocked forever was not reported")
	}
}

func TestCheckPassesWhenGoroutinesExit(t *testing.T) {
	ft := &fakeT{}
	done := Check(ft)
	stop := make(chan struct{})
	exited := make(chan struct{})
	go func() { <-stop; close(exited) }()
	close(stop)
	<-exited
	done()
	if ft.failed {
		t.Fatal("a goroutine that exited was reported as leaked")
	}
}
