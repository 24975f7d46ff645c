package apierror_test

import (
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/internal/apierror"
)

// The same refusal in each API's shape.
func ExampleBody() {
	fmt.Print(string(apierror.Body(true, http.StatusServiceUnavailable, "no endpoint", "")))
	fmt.Print(string(apierror.Body(false, http.StatusBadRequest, "bad prompt", "prompt")))
	// Output:
	// {"error":{"message":"no endpoint","type":"overloaded_error"},"type":"error"}
	// {"error":{"code":400,"message":"bad prompt","param":"prompt","type":"BadRequestError"}}
}
