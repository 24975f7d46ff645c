package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/admission"
)

// FuzzAdmissionHeaders: any objective, fairness ID and queue timeout header
// is either taken or refused with an error naming the queue-timeout header;
// nothing panics, and an accepted timeout lies in (0, 1h].
func FuzzAdmissionHeaders(f *testing.F) {
	f.Add("chat", "tenant-a", "500ms")
	f.Add("", "", "2s")
	f.Add("batch", strings.Repeat("x", 300), "soon")
	f.Add("x", "y", "-1s")
	f.Add("x", "y", "9999999h")
	f.Fuzz(func(t *testing.T, objective, fairness, timeout string) {
		r, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/completions", nil)
		r.Header.Set(HeaderObjective, objective)
		r.Header.Set(HeaderFairnessID, fairness)
		r.Header.Set(HeaderQueueTimeout, timeout)
		_, err := admission.FromHeader(context.Background(), r.Header, time.Unix(0, 0))
		if err != nil && !strings.Contains(err.Error(), HeaderQueueTimeout) {
			t.Fatalf("error does not name the header: %v", err)
		}
		if err == nil && r.Header.Get(HeaderQueueTimeout) != "" {
			d, perr := time.ParseDuration(r.Header.Get(HeaderQueueTimeout))
			if perr != nil || d <= 0 || d > time.Hour {
				t.Fatalf("accepted %q", timeout)
			}
		}
	})
}
