package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ModuleRoot walks up from the working directory to the directory of
// kvroute's go.mod (the root module, not a contrib module's).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/kvroute/kvroute\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the kvroute module")
		}
		dir = parent
	}
}

// Resolve returns flagValue when it is set, else def (a slash-separated
// path such as "out/routesim") under the module root.
func Resolve(flagValue, def string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", errors.New(err.Error() + "; pass -out")
	}
	return filepath.Join(root, filepath.FromSlash(def)), nil
}
