// Package pytest runs testdata/vllm_publisher.py, a vLLM-like KV-event
// publisher on real libzmq (Debian's python3-zmq and python3-msgpack), for
// kvroute's interop tests.
//
// Interop tests call Start (or Require first); when /usr/bin/python3 cannot
// import zmq and msgpack the test is skipped, unless KVROUTE_REQUIRE_INTEROP=1,
// in which case it fails. Only /usr/bin/python3 is used: other interpreters on
// PATH (pyenv) do not carry the Debian packages.
//
// The script (see its header for commands and the generated batch layout)
// prints its bound endpoints as a JSON line, then answers one JSON line per
// stdin command: Publisher wraps that protocol (Publish, Hide, Command, Status)
// and the process (Signal for SIGSTOP/SIGCONT, Kill, Stop).
package pytest
