package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The llm-d router EPP's flags (its server options and logging options)
// that kvroute-epp did not take under the Inference Extension picker's
// names: the metrics port's authentication, TLS and pprof, the shutdown
// drain window, the ext_proc message size limits and TLS settings, --v,
// and the flags that cannot apply, accepted so that llm-d's
// router chart starts kvroute-epp with the args it renders, their values
// checked as llm-d checks them and each logged once at start as ignored,
// with why (llmdIgnoredFlags).

// defaultDrainTimeout is --drain-timeout's default, llm-d's: how long
// ext_proc keeps serving after SIGTERM, once health reports NOT_SERVING, so
// that the requests Envoy sends before it stops using the picker are
// served.
const defaultDrainTimeout = 30 * time.Second

// llmdIgnoredFlags are the llm-d router EPP's flags kvroute-epp accepts and
// ignores, each with why it cannot apply.
var llmdIgnoredFlags = map[string]string{
	"disable-endpoint-subset-filter":      "kvroute-epp always honours the gateway's endpoint subset hint",
	"emit-endpoint-scores":                "kvroute-epp does not write per-endpoint scores into the request's dynamic metadata; its status page shows the latest picks",
	"refresh-metrics-interval":            "kvroute-epp reads endpoint load from its own request accounting and, with --engine-metrics-config, scrapes the engines itself",
	"refresh-prometheus-metrics-interval": "kvroute-epp's metrics are computed when scraped",
	"metrics-staleness-threshold":         "kvroute-epp reads endpoint load from its own request accounting and, with --engine-metrics-config, scrapes the engines itself",
	"enable-grpc-stream-metrics":          "kvroute-epp always exports its ext_proc request metrics (kvroute_extproc_*)",
	"allow-experimental-plugins":          "kvroute-epp loads no llm-d plugins; the --config file's plugin settings it does not carry over are logged at start",
	"plugin-state-staleness-threshold":    "kvroute-epp keeps no per-request plugin state to reap: a request's load is released when its ext_proc stream ends",
	"fairness-id-metric-label-limit":      "kvroute-epp labels no metric with a fairness ID",
}

// llmdServerFlags holds the llm-d router EPP's flags of this file.
type llmdServerFlags struct {
	metricsAuth         bool // --metrics-endpoint-auth, resolved by complete
	metricsAuthSet      bool
	metricsAuthConfig   metricsAuthConfig // --metrics-auth-*, kvroute's own (metricsauthflags.go)
	metricsCertDir      string
	metricsClientCAFile string
	enablePprof         bool
	drainTimeout        time.Duration
	grpcMaxRecvMsgSize  int // 0: grpc-go's default
	grpcMaxSendMsgSize  int // 0: grpc-go's default
	tlsMinVersion       uint16
	tlsCipherSuites     []uint16
	verbosity           int
	ignored             []string // llmdIgnoredFlags given, by name
}

// addLLMDServerFlags defines the flags of this file on fs.
func addLLMDServerFlags(fs *flag.FlagSet, f *flags) {
	l := &f.llmdServer
	fs.BoolFunc("metrics-endpoint-auth", "authenticate (TokenReview) and authorize (SubjectAccessReview, verb get on the path) each caller of the metrics port's /metrics, status page and pprof with its Kubernetes bearer token, as llm-d's router EPP does; /ready stays open for the kubelet (default true with --pool-name, false with --endpoints, where true is an error: there is no Kubernetes client)",
		func(s string) error {
			v, err := strconv.ParseBool(s)
			l.metricsAuth, l.metricsAuthSet = v, true
			return err
		})
	addMetricsAuthFlags(fs, &l.metricsAuthConfig)
	fs.StringVar(&l.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key: serve the metrics port over TLS with them (read at start and, with --enable-cert-reload, again as they change)")
	fs.StringVar(&l.metricsClientCAFile, "metrics-client-ca-file", "", "with --metrics-cert-dir: PEM CA certificates; the metrics port requires a client certificate they verify")
	fs.BoolVar(&l.enablePprof, "enable-pprof", true, "serve Go's pprof handlers under /debug/pprof/ on the metrics port, behind --metrics-endpoint-auth when it is on")
	fs.DurationVar(&l.drainTimeout, "drain-timeout", defaultDrainTimeout, "after SIGTERM, health reports NOT_SERVING at once and ext_proc keeps serving this long before it stops, so that the requests Envoy sends before it stops using the picker are served (0: stop at once)")
	fs.Func("grpc-max-recv-msg-size", "largest gRPC message the ext_proc server receives, as a quantity such as 10MiB or 25MB (default grpc-go's, 4MiB)", msgSize("grpc-max-recv-msg-size", &l.grpcMaxRecvMsgSize))
	fs.Func("grpc-max-send-msg-size", "largest gRPC message the ext_proc server sends, as a quantity such as 10MiB or 25MB (default grpc-go's, unlimited)", msgSize("grpc-max-send-msg-size", &l.grpcMaxSendMsgSize))
	fs.Func("tls-min-version", "with --secure-serving: the lowest TLS version ext_proc accepts, VersionTLS10, VersionTLS11, VersionTLS12 (the default) or VersionTLS13", func(s string) error {
		v, ok := tlsVersions[s]
		if !ok {
			return fmt.Errorf("unknown TLS version %q; supported values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13", s)
		}
		l.tlsMinVersion = v
		return nil
	})
	fs.Func("tls-cipher-suites", "with --secure-serving: comma-separated TLS 1.2 cipher suites ext_proc accepts, by their Go crypto/tls names (TLS 1.3's are not configurable); empty: Go's defaults", func(s string) error {
		ids, err := cipherSuites(s)
		l.tlsCipherSuites = ids
		return err
	})
	fs.IntVar(&l.verbosity, "v", 2, "llm-d's log verbosity, used when neither --log-level nor --zap-log-level is given: 4 and above log at debug, below at info")
	for name, why := range llmdIgnoredFlags {
		switch name {
		case "refresh-metrics-interval", "refresh-prometheus-metrics-interval", "metrics-staleness-threshold":
			fs.Duration(name, 0, "accepted and ignored, a duration: "+why)
		case "plugin-state-staleness-threshold":
			fs.Func(name, "accepted and ignored, a positive duration, as llm-d checks it: "+why, func(s string) error {
				d, err := time.ParseDuration(s)
				if err == nil && d <= 0 {
					err = fmt.Errorf("%v is not positive", d)
				}
				return err
			})
		case "fairness-id-metric-label-limit":
			fs.Func(name, "accepted and ignored, an integer of at least 0, as llm-d checks it: "+why, func(s string) error {
				n, err := strconv.ParseInt(s, 0, 64) // as pflag reads an int: 0x10 and 1_000 too
				if err == nil && n < 0 {
					err = fmt.Errorf("%d is negative", n)
				}
				return err
			})
		default:
			fs.Bool(name, false, "accepted and ignored: "+why)
		}
	}
}

// completeLLMDServerFlags resolves the flags of this file once fs has parsed
// f's command line, and checks them together as llm-d does.
func completeLLMDServerFlags(fs *flag.FlagSet, f *flags) error {
	l := &f.llmdServer
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		set[fl.Name] = true
		if _, ok := llmdIgnoredFlags[fl.Name]; ok {
			l.ignored = append(l.ignored, fl.Name)
		}
	})
	slices.Sort(l.ignored)
	if set["v"] && !set["log-level"] && !set["zap-log-level"] {
		f.logLevel = "info"
		if l.verbosity >= 4 { // llm-d's DEBUG verbosity
			f.logLevel = "debug"
		}
	}
	hasKube := f.poolName != "" || f.endpointSelector != "" || f.renderSelector != ""
	switch {
	case !l.metricsAuthSet:
		l.metricsAuth = hasKube
	case l.metricsAuth && !hasKube:
		return errors.New("--metrics-endpoint-auth asks the Kubernetes API server about each metrics caller, and without --pool-name kvroute-epp has no Kubernetes client; set --metrics-endpoint-auth=false")
	}
	if err := l.metricsAuthConfig.check(); err != nil {
		return err
	}
	if l.metricsAuthConfig.set() && !l.metricsAuth {
		return errors.New("--metrics-auth-allow-ttl, --metrics-auth-deny-ttl, --metrics-auth-cache-entries, --metrics-auth-max-in-flight and --metrics-auth-review-rate are for --metrics-endpoint-auth, which is off")
	}
	if l.metricsClientCAFile != "" && l.metricsCertDir == "" {
		return errors.New("--metrics-client-ca-file requires --metrics-cert-dir")
	}
	if l.metricsCertDir != "" && l.metricsClientCAFile == "" && !l.metricsAuth {
		return errors.New("--metrics-cert-dir serves the metrics port over TLS without authenticating callers; set --metrics-client-ca-file or --metrics-endpoint-auth")
	}
	if l.drainTimeout < 0 {
		return fmt.Errorf("--drain-timeout %v is negative", l.drainTimeout)
	}
	if (l.tlsMinVersion != 0 || l.tlsCipherSuites != nil) && !f.secureServing {
		return errors.New("--tls-min-version and --tls-cipher-suites are for --secure-serving, which is set false")
	}
	return nil
}

// logIgnored logs, once each, the ignored llm-d flags the command line
// gave, with why they cannot apply.
func (l *llmdServerFlags) logIgnored(log *slog.Logger) {
	for _, n := range l.ignored {
		log.Warn("llm-d router EPP flag accepted and ignored", "flag", "--"+n, "why", llmdIgnoredFlags[n])
	}
	if l.tlsMinVersion != 0 && l.tlsMinVersion < tls.VersionTLS12 {
		log.Warn("--tls-min-version accepts TLS versions below 1.2, which are deprecated (RFC 8996)")
	}
}

// grpcOptions are the ext_proc server's message size limits.
func (l *llmdServerFlags) grpcOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if l.grpcMaxRecvMsgSize > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(l.grpcMaxRecvMsgSize))
	}
	if l.grpcMaxSendMsgSize > 0 {
		opts = append(opts, grpc.MaxSendMsgSize(l.grpcMaxSendMsgSize))
	}
	return opts
}

// applyTLS sets ext_proc's TLS floor and cipher suites in c, when given.
func (l *llmdServerFlags) applyTLS(c *tls.Config) {
	if l.tlsMinVersion != 0 {
		c.MinVersion = l.tlsMinVersion
	}
	if l.tlsCipherSuites != nil {
		c.CipherSuites = l.tlsCipherSuites
	}
}

// msgSize is a flag.Func setting *dst to a size given as a Kubernetes
// quantity, an optional trailing B dropped (10MiB, 25MB), as llm-d reads it.
func msgSize(name string, dst *int) func(string) error {
	return func(s string) error {
		s = strings.TrimSpace(s)
		if len(s) > 1 && (s[len(s)-1] == 'B' || s[len(s)-1] == 'b') {
			s = s[:len(s)-1]
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return err
		}
		v, ok := q.AsInt64()
		switch {
		case !ok || v > math.MaxInt:
			return fmt.Errorf("%s overflows the largest supported size: %s", name, s)
		case v < 0:
			return fmt.Errorf("%s must be non-negative, got %d", name, v)
		}
		*dst = int(v)
		return nil
	}
}

// tlsVersions are the TLS versions --tls-min-version names.
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10,
	"VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

// cipherSuites are the IDs of the comma-separated Go crypto/tls cipher
// suite names in s, secure or not, as llm-d accepts them; nil, Go's
// defaults, when s names none, as Kubernetes' cipher suite flags read an
// empty list (tls.Config takes an empty, non-nil list as no TLS 1.2 suite
// at all, and would refuse every TLS 1.2 client).
func cipherSuites(s string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[cs.Name] = cs.ID
	}
	var ids []uint16
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		id, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("unknown cipher suite %q", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
