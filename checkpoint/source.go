package checkpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// IndexSource supplies the state a router's index starts from: a complete
// index with each endpoint's event-stream position, from which the event
// subscriptions resume (replay from the position, verify the payload
// digest, apply what follows). A checkpoint file (FileSource) and a peer
// replica (PeerSource) are sources; an engine-side snapshot (vLLM has two
// competing unmerged designs) would be another, filling the index from the
// engine's state and recording the engine's resume sequence as positions.
type IndexSource interface {
	// Kind names the source in logs and in the label "source" of
	// kvroute_index_restore_total ("file", "peer", …); it must be a fixed
	// string, not derived from input.
	Kind() string
	// String describes this source in logs (a path, a URL).
	String() string
	// Load fills ix — freshly created, with no endpoints — or returns an
	// error and leaves ix empty; it never loads part of a state. An
	// ErrNoSnapshot error means the source has nothing to offer (a missing
	// file), which is not a failure. When ctx ends first, Load returns
	// promptly with an error wrapping ctx's.
	Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error)
}

// ErrNoSnapshot is returned (wrapped) by an IndexSource that has no state
// to offer.
var ErrNoSnapshot = errors.New("kvroute: no snapshot")

// FileSource loads a checkpoint file written by a Keeper (the kvindex
// snapshot format).
type FileSource struct {
	Path string
	// MaxSectionBytes bounds one endpoint section (0: the kvindex default).
	MaxSectionBytes int64
	// MaxEndpoints bounds the endpoint sections (0: the kvindex default).
	MaxEndpoints int
}

// Kind returns "file".
func (s FileSource) Kind() string { return "file" }

// String returns the path.
func (s FileSource) String() string { return s.Path }

// Load reads the file into ix; a missing file is ErrNoSnapshot. A file the
// reader refuses (truncated, corrupt, another version or block size) is
// renamed to Path + ".rejected" for inspection, so that the next checkpoint
// does not destroy it. When ctx ends first, Load returns ctx's error at
// once and leaves ix empty, even if the file system never answers the open
// or a read (a hung network mount): the file is opened and read on a
// goroutine of its own, which ends when the file system answers.
func (s FileSource) Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	ctx, cancel := context.WithCancel(ctx) // ends the file's goroutine when Load returns
	defer cancel()
	pr, pw := io.Pipe()
	opened := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(copyFile(ctx, s.Path, pw, opened))
	}()
	select {
	case err := <-opened:
		if errors.Is(err, fs.ErrNotExist) {
			return kvindex.SnapshotInfo{}, fmt.Errorf("%w: checkpoint %s does not exist", ErrNoSnapshot, s.Path)
		}
		if err != nil {
			return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: checkpoint %s: %w", s.Path, err)
		}
	case <-ctx.Done():
		return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: checkpoint %s: opening abandoned: %w", s.Path, context.Cause(ctx))
	}
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	info, err := ix.ReadSnapshot(bufio.NewReaderSize(pr, 64<<10), kvindex.SnapshotReadOptions{MaxSectionBytes: s.MaxSectionBytes, MaxEndpoints: s.MaxEndpoints})
	stop()
	_ = pr.Close() // a file going on past what was read stops being copied
	if err != nil {
		var se *kvindex.SnapshotError
		if errors.As(err, &se) && se.Reason != kvindex.SnapshotReasonRead {
			if rerr := os.Rename(s.Path, s.Path+".rejected"); rerr == nil {
				return info, fmt.Errorf("kvroute: checkpoint %s (kept as %s.rejected): %w", s.Path, s.Path, err)
			}
		}
		if ctx.Err() != nil {
			return info, fmt.Errorf("kvroute: checkpoint %s: reading abandoned: %w", s.Path, context.Cause(ctx))
		}
		return info, fmt.Errorf("kvroute: checkpoint %s: %w", s.Path, err)
	}
	<-done // the file was read to its end: its goroutine has closed it
	return info, nil
}

// copyFile opens path, reports the outcome on opened and copies the file to
// w until its end, an error, or ctx's end, which closes the file: that cuts
// a read waiting on a pipe at once, while a regular file's read ends when
// the file system answers.
func copyFile(ctx context.Context, path string, w io.Writer, opened chan<- error) error {
	f, err := os.Open(path)
	opened <- err
	if err != nil {
		return err
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer stop()
	_, err = io.Copy(w, f)
	return err
}

// PeerSource loads the snapshot a peer router serves (Keeper.Handler),
// validated exactly as a file is.
type PeerSource struct {
	URL string // the peer's snapshot handler, e.g. "http://10.0.0.5:9091/kvroute/snapshot"
	// Token, when non-empty, is proved to the peer without being sent:
	// "Authorization: KVRoute-HMAC t=<unix seconds>, mac=<hex>", an
	// HMAC-SHA256 keyed with Token over the time and URL (see
	// Keeper.Handler), so that a peer URL that is not what it claims
	// collects nothing it can use elsewhere.
	Token string
	// Client makes the request; nil uses a client without overall timeout
	// (the context bounds the transfer).
	Client *http.Client
	// MaxSectionBytes bounds one endpoint section (0: the kvindex default).
	MaxSectionBytes int64
	// MaxEndpoints bounds the endpoint sections (0: the kvindex default).
	MaxEndpoints int
	// ProgressTimeout abandons the peer when it sends nothing for this
	// long, before its response headers or mid-stream (0:
	// DefaultBootstrapProgressTimeout), so that a stalled peer costs
	// seconds, not the whole bootstrap timeout.
	ProgressTimeout time.Duration
}

// Kind returns "peer".
func (s PeerSource) Kind() string { return "peer" }

// String returns the URL.
func (s PeerSource) String() string { return s.URL }

// errPeerStatus is a peer answering something else than 200.
var errPeerStatus = errors.New("kvroute: peer snapshot request refused")

// Load streams the peer's snapshot into ix. A peer that sends nothing for
// ProgressTimeout is abandoned with an error counted as "timeout"; ctx
// bounds the whole transfer.
func (s PeerSource) Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	return racePeers(ctx, ix, []PeerSource{s}, 0, nil)
}

// progressTimeout returns ProgressTimeout or its default.
func (s PeerSource) progressTimeout() time.Duration {
	if s.ProgressTimeout > 0 {
		return s.ProgressTimeout
	}
	return DefaultBootstrapProgressTimeout
}
