// Package conftest checks that a configuration type decodes by kvroute's
// configuration rules on its own: decoded with plain encoding/json, as a
// host that embeds the type in its own file would decode it, a key in
// another case, a key given twice, an unknown key and a bare number for a
// duration are errors naming the key's path, keys not present keep the
// value they had, and what encoding/json writes decodes back to the same
// value. Every package whose configuration types have JSON methods through
// package jsonconf runs the same table through Check in its tests, instead
// of a loop of its own.
//
// Check returns an error rather than taking a testing.TB, so that it is
// plain code with a runnable example.
package conftest
