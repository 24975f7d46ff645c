// Package wiretest holds the golden KV-event payloads of vLLM and SGLang
// (bytes their own msgspec encoders wrote, with the batches they decode
// to) and the batch builders that the tests of kvevents/wire and kvevents
// share.
package wiretest
