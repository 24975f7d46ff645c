package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// Config.Validate refuses what New refuses of one key, with New's error,
// so that a loader reports it when the file is read; what it accepts New
// accepts.
func TestConfigValidateAgreesWithNew(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxBodyBytes: -1}, "gateway: maxBodyBytes -1 is negative"},
		{Config{MaxBodyBytesInFlight: -2}, "gateway: maxBodyBytesInFlight -2 is negative"},
		{Config{BodyReadTimeout: -time.Second}, "gateway: bodyReadTimeout -1s is negative"},
		{Config{ResponseWriteTimeout: -time.Second}, "gateway: responseWriteTimeout -1s is negative"},
		{Config{MaxIdleConnsPerHost: -1}, "gateway: maxIdleConnsPerHost -1 is negative"},
		{Config{TokenizeOnce: []render.API{render.APIChatCompletions}}, `gateway: tokenizeOnce cannot include "chat_completions"`},
		{Config{TokenizeOnce: []render.API{"completion"}}, `gateway: tokenizeOnce names unknown API "completion"`},
		{Config{CORSAllowedOrigins: []string{"app.example"}}, `gateway: corsAllowedOrigins: "app.example" is not "*" or an origin`},
		{Config{CORSAllowedOrigins: []string{""}}, `gateway: corsAllowedOrigins: "" is not "*" or an origin`},
		{Config{CORSAllowCredentials: true}, "gateway: corsAllowCredentials needs corsAllowedOrigins"},
		{Config{}, ""},
		{Config{TokenizeOnce: []render.API{render.APICompletions}, CORSAllowedOrigins: []string{"*", "http://localhost:3000"}, CORSAllowCredentials: true}, ""},
	} {
		err := tc.cfg.Validate()
		h, nerr := New(tc.cfg, new(RoundRobin), Options{})
		if tc.want == "" {
			require.NoError(t, err, "%+v", tc.cfg)
			require.NoError(t, nerr, "%+v", tc.cfg)
			h.Close()
			continue
		}
		require.EqualError(t, err, nerr.Error(), "%+v", tc.cfg)
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
}
