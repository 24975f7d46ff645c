package checkpoint

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/kvindex"
)

// Defaults of the checkpoint and the bootstrap, applied where a setting is
// zero.
const (
	// DefaultInterval is how often the checkpoint is rewritten.
	DefaultInterval = time.Minute
	// DefaultBootstrapTimeout bounds loading the state from one source
	// (a peer's whole transfer, or a file).
	DefaultBootstrapTimeout = 2 * time.Minute
	// DefaultBootstrapProgressTimeout is how long a peer may send nothing
	// (no response headers, no byte of its snapshot) before it is
	// abandoned.
	DefaultBootstrapProgressTimeout = 5 * time.Second
	// DefaultMaxSectionBytes bounds one endpoint section of a checkpoint
	// file or a peer's snapshot: the memory a restore holds at once is
	// about one section.
	DefaultMaxSectionBytes = kvindex.DefaultMaxSnapshotSectionBytes
	// DefaultMaxEndpoints bounds the endpoint sections of a checkpoint
	// file or a peer's snapshot.
	DefaultMaxEndpoints = kvindex.DefaultMaxSnapshotEndpoints
	// DefaultServeWriteTimeout is how long each write of a snapshot served
	// to a peer may wait for the peer to take it: far beyond the time a
	// bootstrapping peer spends applying one section between reads.
	DefaultServeWriteTimeout = time.Minute
	// DefaultServeMinRate is the bytes per second a peer must take a
	// served snapshot at, on average, after its grace
	// (BootstrapConfig.ServeMinRate), 1 MiB/s: over a hundred times below
	// a 1 Gbit/s link between the replicas of one pool, and far below
	// what a peer with the default bootstrap timeout (2m) needs to load a
	// large snapshot at all (over 8 MiB/s for 1 GiB), so only a peer that
	// would not finish anyway, or does not mean to, is cut.
	DefaultServeMinRate = 1 << 20
	// DefaultBootstrapMaxClockSkew is how far the time of a peer's proof
	// of the token may be from the serving replica's clock.
	DefaultBootstrapMaxClockSkew = 30 * time.Second
)

// Config configures the index checkpoint: a file rewritten periodically
// and on Close, and loaded at start. vLLM announces a block only when it
// computes it and replays only its last batches (10,000 by default), so a
// router restarted without a checkpoint never learns the prefixes cached
// before the replay window; with it, the index starts complete and every
// event stream resumes from the checkpoint's positions. In a kvroute
// configuration it is the "checkpoint" section.
type Config struct {
	// Path is the checkpoint file (not a directory); empty disables
	// checkpoints. Its directory must exist; the file is replaced
	// atomically (a temporary file in the same directory, fsync, rename,
	// fsync of the directory). It is one router's: Restore claims it with
	// an advisory lock on Path + ".lock" until Close, and refuses a path
	// another router holds (ErrPathInUse).
	Path string `json:"path"`
	// Interval between periodic writes, a duration string (default "1m");
	// negative writes only on Close.
	Interval time.Duration `json:"interval"`
}

// BootstrapConfig configures loading the index at start — from peer
// replicas, then the checkpoint file — and the token the Keeper's snapshot
// Handler requires. In a kvroute configuration it is the "bootstrap"
// section.
type BootstrapConfig struct {
	// Peers are the URLs of peer routers' snapshot handlers, asked in
	// order: when the peer asked has not begun sending its snapshot within
	// half of progressTimeout (at most a second), the next is asked too,
	// and the first to begin sending is loaded (the others are cancelled,
	// and asked again should it fail). The first valid snapshot wins. A
	// peer that answers 503 with Retry-After (busy serving 4 others;
	// counted in kvroute_index_restore_total as result "busy") is asked
	// again once that time has passed (at least 1s) when no other peer is
	// left to ask, if that time falls within Timeout of the bootstrap's
	// start; else its refusal stands. Peers are tried before the
	// checkpoint file (a live peer's state is newer). A host is written in
	// ASCII (an international name in its punycode form).
	Peers []string `json:"peers"`
	// Token is the secret the replicas share: proved to peers without
	// being sent (an HMAC over the time and the URL asked; see
	// Keeper.Handler), and required by this router's snapshot Handler when
	// non-empty. A control character (a trailing newline) or a space at
	// either end is an error, as an older release sent the token in a
	// header, which cannot carry it intact.
	Token string `json:"token"`
	// MaxClockSkew is how far the time of a peer's proof of the token may
	// be from this router's clock, either way, for its Handler to serve
	// it; a proof dated beyond is refused and counted in
	// kvroute_snapshot_serves_total as result "clock_skew". It bounds how
	// long a proof seen on the wire can be replayed, to the same URL only.
	// A duration string (default "30s").
	MaxClockSkew time.Duration `json:"maxClockSkew"`
	// Timeout bounds loading from one source — one peer's whole transfer,
	// or the file — a duration string (default "2m").
	Timeout time.Duration `json:"timeout"`
	// ProgressTimeout abandons a peer that sends nothing for this long,
	// before its response headers or mid-stream, for the next one; counted
	// in kvroute_index_restore_total as result "timeout". A duration string
	// (default "5s").
	ProgressTimeout time.Duration `json:"progressTimeout"`
	// MaxSectionBytes bounds one endpoint section of a peer's snapshot or
	// the checkpoint file; a larger one is refused ("too_large"). A
	// restore holds about one section in memory at once. Default 1 GiB
	// (DefaultMaxSectionBytes).
	MaxSectionBytes int64 `json:"maxSectionBytes"`
	// MaxEndpoints bounds the endpoint sections of a peer's snapshot or
	// the checkpoint file; one with more is refused ("too_large"). Each
	// section is loaded once checked, and an endpoint with a position but
	// no entries costs memory the index's byte bound does not see, so
	// this bounds what a snapshot of many small sections costs. Default
	// 16384 (DefaultMaxEndpoints).
	MaxEndpoints int `json:"maxEndpoints"`
	// ServeWriteTimeout is the time each write of a snapshot this router's
	// Handler serves may wait for the peer to take it. A peer that asks
	// for a snapshot and stops reading would otherwise hold one of the 4
	// serving slots for as long as its connection lives, and 4 such peers
	// would turn every bootstrapping replica away. Past it the transfer is
	// cut and counted in kvroute_snapshot_serves_total as result
	// "stalled". The deadline restarts at every write, so a slow peer that
	// keeps reading is not cut by it (ServeMinRate bounds such a peer). A
	// duration string (default "1m").
	ServeWriteTimeout time.Duration `json:"serveWriteTimeout"`
	// ServeMinRate is the bytes per second a peer must take a snapshot
	// this router's Handler serves at, on average: the writes of a
	// serve's first n bytes may wait for the peer at most
	// ServeWriteTimeout plus n at this rate in all (the time the router
	// takes to produce the bytes does not count), so a peer holds its
	// serving slot at most twice ServeWriteTimeout plus the snapshot's
	// size at this rate. A peer that reads a few bytes within every write
	// timeout would otherwise restart it forever and hold its slot as long
	// as it likes. Past it the transfer is cut and counted in
	// kvroute_snapshot_serves_total as result "too_slow". Bytes per second
	// (default 1 MiB/s, DefaultServeMinRate; see there why it spares an
	// honest peer on a slow link).
	ServeMinRate int64 `json:"serveMinRate"`
}

// Validate reports a Path whose directory does not exist, or that names a
// directory itself (a volume's mount point given for the file), naming the
// key ("path"), so that a mistyped path fails at start rather than at the
// first write.
func (c Config) Validate() error {
	if c.Path != "" {
		if fi, err := os.Stat(filepath.Dir(c.Path)); err != nil || !fi.IsDir() {
			return fmt.Errorf("path %q: directory does not exist", c.Path)
		}
		if fi, err := os.Stat(c.Path); err == nil && fi.IsDir() || strings.HasSuffix(c.Path, string(filepath.Separator)) {
			return fmt.Errorf("path %q is a directory; give the checkpoint file's path in it", c.Path)
		}
	}
	return nil
}

// Validate reports the first invalid setting, naming its key: a peer that
// is not an http(s) URL, a token no request can carry intact (see Token),
// or a negative timeout or bound.
func (c BootstrapConfig) Validate() error {
	for _, p := range c.Peers {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("peers: %q is not an http(s) URL", p)
		}
		if !asciiHost(u.Host) {
			return fmt.Errorf("peers: %q: write its host in ASCII (an international name in its punycode form, xn--...), the form the Host header carries", p)
		}
	}
	switch {
	case !validToken(c.Token):
		return errors.New("token: not a value an HTTP header carries as sent (a control character such as a trailing newline, or spaces around it)")
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", c.Timeout)
	case c.ProgressTimeout < 0:
		return fmt.Errorf("progressTimeout %v is negative", c.ProgressTimeout)
	case c.MaxSectionBytes < 0:
		return fmt.Errorf("maxSectionBytes %d is negative", c.MaxSectionBytes)
	case c.MaxEndpoints < 0:
		return fmt.Errorf("maxEndpoints %d is negative", c.MaxEndpoints)
	case c.ServeWriteTimeout < 0:
		return fmt.Errorf("serveWriteTimeout %v is negative", c.ServeWriteTimeout)
	case c.MaxClockSkew < 0:
		return fmt.Errorf("maxClockSkew %v is negative", c.MaxClockSkew)
	case c.ServeMinRate < 0:
		return fmt.Errorf("serveMinRate %d is negative", c.ServeMinRate)
	}
	return nil
}

// asciiHost reports whether host is all ASCII. Go's HTTP client sends an
// international host name in its punycode form, so a proof signed over
// the name as configured would not match the Host a peer that advertises
// no URL checks it against.
func asciiHost(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validToken reports whether a bearer token travels intact in an
// Authorization header: no control character but a tab inside it (Go's
// client refuses to send one, such as the trailing newline of a token read
// from a file) and no space or tab at either end (a server trims them, so
// the handler's comparison could never succeed).
func validToken(tok string) bool {
	if strings.TrimSpace(tok) != tok {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x20 && tok[i] != '\t' || tok[i] == 0x7f {
			return false
		}
	}
	return true
}

// configFields and bootstrapFields are the configs without their methods,
// so that decoding them does not recurse into UnmarshalJSON.
type (
	configFields    Config
	bootstrapFields BootstrapConfig
)

// UnmarshalJSON decodes c strictly wherever it is decoded: unknown keys are
// an error naming their path and interval is a Go duration string. Keys not
// present keep their current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with interval as a Go duration string.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }

// UnmarshalJSON decodes c strictly wherever it is decoded: unknown keys are
// an error naming their path and the timeouts are Go duration strings. Keys
// not present keep their current value.
func (c *BootstrapConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*bootstrapFields)(c))
}

// MarshalJSON encodes c with the timeouts as Go duration strings.
func (c BootstrapConfig) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(bootstrapFields(c)) }
