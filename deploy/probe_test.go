package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	eppCmd    = "../contrib/extproc/cmd/kvroute-epp"
	eppStatus = "../contrib/extproc/status.go"
)

// parseGoDir parses the non-test Go files of one package directory of the
// workspace into one file holding all their declarations, so that a check
// does not depend on which file of the package declares what.
func parseGoDir(t *testing.T, dir string) *ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	merged := &ast.File{Name: ast.NewIdent("main")}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		merged.Decls = append(merged.Decls, parseGo(t, p).Decls...)
	}
	require.NotEmpty(t, merged.Decls, "no Go source in %s", dir)
	return merged
}

// parseGo parses one Go source file of the workspace.
func parseGo(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	return f
}

// stringConst returns the value of the string constant name declared in f.
func stringConst(t *testing.T, f *ast.File, name string) string {
	t.Helper()
	lit := constLit(t, f, name)
	require.Equal(t, token.STRING, lit.Kind, "%s is not a string literal", name)
	v, err := strconv.Unquote(lit.Value)
	require.NoError(t, err)
	return v
}

// intConst returns the value of the int constant name declared in f.
func intConst(t *testing.T, f *ast.File, name string) int {
	t.Helper()
	lit := constLit(t, f, name)
	require.Equal(t, token.INT, lit.Kind, "%s is not an int literal", name)
	v, err := strconv.Atoi(lit.Value)
	require.NoError(t, err)
	return v
}

// constLit returns the literal the constant name declared in f is.
func constLit(t *testing.T, f *ast.File, name string) *ast.BasicLit {
	t.Helper()
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name == name && i < len(vs.Values) {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s is not a literal", name)
					return lit
				}
			}
		}
	}
	t.Fatalf("no constant %s", name)
	return nil
}

// intFlagDefault returns the default of the int flag name as kvroute-epp
// declares it (fs.IntVar(&v, name, default, usage)).
func intFlagDefault(t *testing.T, f *ast.File, name string) int {
	t.Helper()
	def := -1
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 4 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "IntVar" {
			return true
		}
		if lit, ok := call.Args[1].(*ast.BasicLit); !ok || lit.Value != strconv.Quote(name) {
			return true
		}
		lit, ok := call.Args[2].(*ast.BasicLit)
		require.True(t, ok && lit.Kind == token.INT, "--%s's default is not an int literal", name)
		v, err := strconv.Atoi(lit.Value)
		require.NoError(t, err)
		def = v
		return false
	})
	require.NotEqual(t, -1, def, "kvroute-epp declares no int flag --%s", name)
	return def
}

// muxPaths returns the first argument of every mux.Handle call in f, as
// written (a string literal's value without the method a ServeMux pattern
// may start with, "GET /metrics" giving "/metrics", or a selector such as
// "extproc.ReadyPath").
func muxPaths(f *ast.File) []string {
	var paths []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Handle" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "mux" {
			return true
		}
		switch a := call.Args[0].(type) {
		case *ast.BasicLit:
			v, _ := strconv.Unquote(a.Value)
			if method, path, ok := strings.Cut(v, " "); ok && method != "" && !strings.Contains(method, "/") {
				v = strings.TrimLeft(path, " ")
			}
			paths = append(paths, v)
		case *ast.SelectorExpr:
			if p, ok := a.X.(*ast.Ident); ok {
				paths = append(paths, p.Name+"."+a.Sel.Name)
			}
		}
		return true
	})
	return paths
}

// TestReadinessProbeIsWhatThePickerServes checks that the readiness probe of
// every kvroute-epp Deployment (the plain manifest, the chart's with its
// defaults and with another metrics port) asks for the path kvroute-epp
// serves its readiness on, on the container port that is its --metrics-port
// (the flag as passed, else its default in kvroute-epp's source).
func TestReadinessProbeIsWhatThePickerServes(t *testing.T) {
	mainGo := parseGoDir(t, eppCmd)
	readyPath := stringConst(t, parseGo(t, eppStatus), "ReadyPath")
	require.Equal(t, "/ready", readyPath)
	// /metrics and /ready are served by one mux, the metrics port's.
	handled := muxPaths(mainGo)
	require.Contains(t, handled, "/metrics")
	require.Contains(t, handled, "extproc.ReadyPath")
	defaultPort := intFlagDefault(t, mainGo, "metrics-port")
	require.Equal(t, 9090, defaultPort)

	s := loadSchemas(t)
	docs := map[string][]byte{
		"chart (defaults)": chartObjects(t, s, minimalValues)["Deployment"][0],
		"chart (metrics 9191)": chartObjects(t, s, `
inferenceExtension: {model: Qwen/Qwen3-32B, metricsPort: 9191}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`)["Deployment"][0],
	}
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: Deployment") {
			docs["kvroute-epp/deployment.yaml"] = doc
		}
	}
	require.Len(t, docs, 3)
	for name, doc := range docs {
		var d appsv1.Deployment
		require.NoError(t, yaml.UnmarshalStrict(doc, &d), name)
		var c *corev1.Container
		for i := range d.Spec.Template.Spec.Containers {
			if d.Spec.Template.Spec.Containers[i].Name == "epp" {
				c = &d.Spec.Template.Spec.Containers[i]
			}
		}
		require.NotNil(t, c, name)
		metricsPort := defaultPort
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--metrics-port="); ok {
				metricsPort, err = strconv.Atoi(v)
				require.NoError(t, err, name)
			}
		}
		probe := c.ReadinessProbe
		require.NotNil(t, probe, name)
		require.NotNil(t, probe.HTTPGet, "%s: the readiness probe is not an HTTP GET", name)
		require.Equal(t, readyPath, probe.HTTPGet.Path, name)
		port := int(probe.HTTPGet.Port.IntVal)
		if probe.HTTPGet.Port.StrVal != "" {
			port = -1
			for _, p := range c.Ports {
				if p.Name == probe.HTTPGet.Port.StrVal {
					port = int(p.ContainerPort)
				}
			}
			require.NotEqual(t, -1, port, "%s: no container port named %s", name, probe.HTTPGet.Port.StrVal)
		}
		require.Equal(t, metricsPort, port, "%s: the readiness probe's port is not --metrics-port", name)
	}
}

// TestChartFallbacksBoundIsThePickers checks that the chart accepts
// inferenceExtension.fallbacks up to kvroute-epp's bound
// (extproc.MaxFallbacks, read from its source) and refuses one more.
func TestChartFallbacksBoundIsThePickers(t *testing.T) {
	maxFallbacks := intConst(t, parseGo(t, "../contrib/extproc/server.go"), "MaxFallbacks")
	values := func(n int) string {
		return "inferenceExtension: {model: m, fallbacks: " + strconv.Itoa(n) + "}\ninferencePool: {modelServers: {matchLabels: {app: vllm}}}\n"
	}
	require.Contains(t, eppArgs(t, chartObjects(t, loadSchemas(t), values(maxFallbacks))["Deployment"][0]),
		"--fallbacks="+strconv.Itoa(maxFallbacks))
	require.NotContains(t, strings.Join(eppArgs(t, chartObjects(t, loadSchemas(t), values(0))["Deployment"][0]), " "), "--fallbacks")
	_, err := renderChart(t, values(maxFallbacks+1))
	require.ErrorContains(t, err, "inferenceExtension.fallbacks")
}

// kvroute-epp --metrics-cert-dir serves the whole metrics port over TLS,
// /ready included: the chart's readiness probe then asks over HTTPS (the
// kubelet does not verify the certificate), where over HTTP every probe
// failed and the picker was never ready. --metrics-client-ca-file requires
// a client certificate on every connection, which the kubelet's probe never
// presents, and the chart's ServiceMonitor scrapes over HTTP: the render
// fails on either, naming why.
func TestChartProbesTheMetricsPortOverTLS(t *testing.T) {
	with := func(values string) string {
		return strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n"+values, 1)
	}
	const certs = "  volumes: [{name: mtls, secret: {secretName: m}}]\n  volumeMounts: [{name: mtls, mountPath: /etc/m}]\n"
	c := eppContainer(t, chartObjects(t, loadSchemas(t), with(certs+"  flags: {metrics-cert-dir: /etc/m}\n"))["Deployment"][0])
	require.Equal(t, corev1.URISchemeHTTPS, c.ReadinessProbe.HTTPGet.Scheme)
	c = eppContainer(t, chartObjects(t, loadSchemas(t), minimalValues)["Deployment"][0])
	require.Contains(t, []corev1.URIScheme{"", corev1.URISchemeHTTP}, c.ReadinessProbe.HTTPGet.Scheme)

	_, err := renderChart(t, with(certs+"  flags: {metrics-cert-dir: /etc/m, metrics-client-ca-file: /etc/m/ca.crt}\n"))
	require.ErrorContains(t, err, "inferenceExtension.flags.metrics-client-ca-file")
	_, err = renderChart(t, with(certs+"  flags: {metrics-cert-dir: /etc/m}\n  monitoring: {prometheus: {enable: true}}\n"))
	require.ErrorContains(t, err, "inferenceExtension.flags.metrics-cert-dir")
}
