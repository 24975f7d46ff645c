package pytest_test

import (
	"fmt"
	"path/filepath"

	"github.com/kvroute/kvroute/internal/pytest"
)

// Interop tests start the vLLM-like publisher with pytest.Start(t, cfg); the
// script lives in the module's testdata directory.
func ExampleScriptPath() {
	fmt.Println(filepath.Base(pytest.ScriptPath()))
	// Output: vllm_publisher.py
}
