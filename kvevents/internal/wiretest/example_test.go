package wiretest_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"reflect"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// Each golden vector is a payload an engine's own encoder wrote, the batch
// kvroute's decoder must read from it, and the layout kvroute's encoder
// must reproduce it with: the checks the tests of kvevents/wire run.
func ExampleVectors() {
	d := wire.NewDecoder(wire.Limits{})
	for _, v := range wiretest.Vectors()[:4] {
		payload, err := hex.DecodeString(v.Hex)
		if err != nil {
			fmt.Println(v.Name, err)
			continue
		}
		var got wire.Batch
		err = d.Decode(payload, &got)
		want := v.Want()
		fmt.Printf("%s: %d bytes, decodes: %t, re-encodes: %t\n", v.Name, len(payload),
			err == nil && reflect.DeepEqual(&got, want), bytes.Equal(wire.AppendBatch(nil, want, v.Format), payload))
	}
	// Output:
	// V1/current: 202 bytes, decodes: true, re-encodes: true
	// V1/legacy: 81 bytes, decodes: true, re-encodes: true
	// V2/current: 206 bytes, decodes: true, re-encodes: true
	// V2/legacy: 85 bytes, decodes: true, re-encodes: true
}
