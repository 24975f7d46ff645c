package render

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/internal/pytest"
)

// cpythonDumps is a long-running /usr/bin/python3 that answers, for each
// input, json.dumps(json.loads(input)) with CPython's default settings: the
// formatting pyDumps reproduces. One process serves a whole fuzz run.
type cpythonDumps struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// cpythonScript reads base64 lines; it answers {"ok": true, "out": dumps} or
// {"ok": false} (invalid UTF-8 or JSON CPython rejects).
const cpythonScript = `
import base64, json, sys
for line in sys.stdin:
    try:
        out = json.dumps(json.loads(base64.b64decode(line).decode("utf-8")))
        print(json.dumps({"ok": True, "out": out}), flush=True)
    except Exception:
        print(json.dumps({"ok": False}), flush=True)
`

func startCPythonDumps(t testing.TB) *cpythonDumps {
	t.Helper()
	pytest.Require(t)
	cmd := exec.Command(pytest.Python, "-c", cpythonScript)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &cpythonDumps{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	return p
}

// dumps returns CPython's json.dumps(json.loads(in)), or ok false when
// CPython rejects in.
func (p *cpythonDumps) dumps(in []byte) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, base64.StdEncoding.EncodeToString(in)); err != nil {
		return "", false, err
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return "", false, err
	}
	var a struct {
		OK  bool   `json:"ok"`
		Out string `json:"out"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return "", false, fmt.Errorf("python answered %q: %w", line, err)
	}
	return a.Out, a.OK, nil
}

// FuzzPyDumpsMatchesCPython holds pyDumps to CPython's json.dumps: whenever
// both accept an input they produce the same bytes, and pyDumps accepts
// nothing CPython rejects (CPython also reads NaN and Infinity literals,
// which pyDumps refuses, and vLLM never receives them from a JSON client).
// It runs where the interop tests run (skipped without /usr/bin/python3 and
// its packages, failing then under KVROUTE_REQUIRE_INTEROP=1).
func FuzzPyDumpsMatchesCPython(f *testing.F) {
	for _, s := range []string{
		`{"city": "Zürich", "emoji": "🎉", "n": 1.0, "big": 1e20, "list": [1, 2.50, -0], "nested": {"z": 1, "a": null}}`,
		`{"b":1,"a":2,"b":3}`,
		`[1e16,1e15,0.0001,0.00001,123.456,-0.0,1E400,-1e400,1e-400,5e-324,1.7976931348623157e308,12345678901234567890,3.0e2]`,
		`{"s":"tab\tnl\nq\"bs\\ctl\u0001del\u007f/slash<>&","u":"\u2603\ud83d\ude00"}`,
		`"\ud800"`, `"\udc00x"`, "\"\xff\"", `[]`, `{}`, ` 0 `, `-0.0e-0`,
	} {
		f.Add([]byte(s))
	}
	py := startCPythonDumps(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		got, gerr := pyDumps(in)
		want, ok, err := py.dumps(in)
		if err != nil {
			t.Fatalf("python helper: %v", err)
		}
		switch {
		case gerr == nil && !ok:
			t.Fatalf("pyDumps accepts %q (%q), CPython rejects it", in, got)
		case gerr == nil && got != want:
			t.Fatalf("pyDumps(%q)\n got %q\nwant %q (CPython)", in, got, want)
		}
	})
}
