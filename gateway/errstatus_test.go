package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/tokenload"
)

// Pick's errors get the HTTP statuses the root package's doc and the
// README list.
func TestPickErrorsMapToTheDocumentedStatuses(t *testing.T) {
	for err, want := range map[error]int{
		kvroute.ErrModelMismatch:                             http.StatusNotFound,
		tokenload.ErrInvalidRequestID:                        http.StatusBadRequest,
		fmt.Errorf("%w: x", tokenload.ErrDuplicateRequestID): http.StatusConflict,
		kvroute.ErrNoEndpoints:                               http.StatusServiceUnavailable,
		kvroute.ErrEndpointsNotSet:                           http.StatusServiceUnavailable,
		kvroute.ErrNoAPI:                                     http.StatusServiceUnavailable,
	} {
		h, nerr := New(Config{}, errPicker{err}, Options{})
		require.NoError(t, nerr)
		h.SetEndpoints([]kvroute.Endpoint{{ID: "127.0.0.1:1"}})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"prompt":"x"}`)))
		require.Equal(t, want, rec.Code, "%v: %s", err, rec.Body.String())
		h.Close()
	}
}
