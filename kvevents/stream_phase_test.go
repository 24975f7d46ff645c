package kvevents

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain fails the package's tests if any stream, in any test, moved
// between phases outside the transition table.
func TestMain(m *testing.M) {
	code := m.Run()
	if n := strayTransitions.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "kvevents: %d stream transitions outside the transition table (see the error logs)\n", n)
		code = 1
	}
	os.Exit(code)
}

// The package doc's diagram lists exactly the transitions the table allows.
func TestPhaseDiagramIsTheTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	byName := map[string]phase{}
	for ph := range transitions {
		byName[string(ph)] = ph
	}
	var inDoc []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(\w+) +→ (\w+) `).FindAllStringSubmatch(string(doc), -1) {
		from, ok1 := byName[m[1]]
		to, ok2 := byName[m[2]]
		require.True(t, ok1 && ok2, "diagram line %q names no phase", m[0])
		inDoc = append(inDoc, string(from)+"→"+string(to))
	}
	var inTable []string
	for from, tos := range transitions {
		for _, to := range tos {
			inTable = append(inTable, string(from)+"→"+string(to))
		}
	}
	slices.Sort(inDoc)
	slices.Sort(inTable)
	require.Equal(t, inTable, inDoc)
}

func TestTransitionTableIsClosedUnderPhases(t *testing.T) {
	for _, ph := range []phase{phaseConnecting, phaseResuming, phaseLive, phaseReplaying, phaseSnapshot, phaseClosed} {
		require.Contains(t, transitions, ph, "every phase has a row")
	}
	require.Len(t, transitions, 6)
	require.Empty(t, transitions[phaseClosed], "closed is final")
	for from, tos := range transitions {
		require.NotContains(t, tos, from, "%s → itself is no transition", from)
	}
}
