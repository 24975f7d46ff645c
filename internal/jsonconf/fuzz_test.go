package jsonconf

import (
	"reflect"
	"testing"
)

// FuzzUnmarshal checks that the decoder never panics on any input and that
// whatever it accepts survives a Marshal / Unmarshal round trip.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"idle":"1m","inner":{"ttl":"2s","per":{"a":"250ms"},"list":["1h","1ns"]},"ptr":{"ttl":"3s"},"self":{"wait":"5s"}}`,
		`{"inner":{"ttl":2000}}`, `{"tags":["a"],"weight":0.5,"any":{"x":[1,{"y":null}]}}`, `{"Enabled":true}`,
		`{"inner":{"ttl":"1s","ttl":"2s"}}`, `null`, `{"ptr":null}`, `{"inner":{"list":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var o outer
		if err := Unmarshal(data, &o); err != nil {
			return
		}
		o.Self.Seen = false
		out, err := Marshal(o)
		if err != nil {
			t.Fatalf("marshal %+v: %v", o, err)
		}
		var back outer
		if err := Unmarshal(out, &back); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		back.Self.Seen = false
		if !reflect.DeepEqual(o, back) {
			t.Fatalf("round trip changed %+v to %+v (%s)", o, back, out)
		}
	})
}
