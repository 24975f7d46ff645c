package wire

// Internals the external tests (package wire_test) check.

// DefaultLimits is defaultLimits.
var DefaultLimits = defaultLimits

// DecoderLimits returns the limits d enforces, defaults filled in.
func DecoderLimits(d *Decoder) Limits { return d.lim }

// ArenaCap is the capacity of b's arena, the bytes it keeps for bin hashes.
func ArenaCap(b *Batch) int { return cap(b.arena) }
