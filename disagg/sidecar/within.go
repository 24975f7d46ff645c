package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// Budget bounds the bytes of request bodies a caller holds at once, over
// all its requests; Exchange.PrefillWithin charges the copies it makes of
// a body to it, as a Handler charges them to its
// Config.MaxBodyBytesInFlight. Acquire takes n bytes, false when there is
// no room for them; Release gives n back. It must be safe for concurrent
// use. kvroute's gateway passes its budget of body bytes in flight.
type Budget interface {
	Acquire(n int64) bool
	Release(n int64)
}

// ErrNoRoom is returned by Exchange.PrefillWithin when its Budget has no
// room for the one copy a request needs to go to the decoder at all.
var ErrNoRoom = bytebudget.ErrNoRoom

// PrefillWithin is Prefill with every copy it makes of body charged to b
// before it is made, so that a caller bounding its bodies' memory bounds
// theirs too: a wide body's UTF-8 copy, the parsed members and the prefill
// body (about twice the body, during the prefill step), the decode body
// (which takes the prefill body's room, reserved before the prefiller is
// sent anything) and LocalBody when it is a copy.
//
// A body over Config.MaxBodyBytes, which the caller took under a larger
// limit of its own, is not sent to the prefiller: it falls back to a local
// prefill (ReasonBodyTooLarge), the decoder getting LocalBody, where
// Prefill answers ErrTooLarge. A split whose copies find no room falls
// back to a local prefill
// (ReasonBodyBudget) before the prefiller is sent anything: DecodeBody and
// LocalBody are then the body itself when it carries no
// kv_transfer_params of its own. ErrNoRoom when even going to the decoder
// alone needs a copy that finds no room (a wide body, or one whose own
// kv_transfer_params are to be dropped); nothing is held then.
//
// held is what DecodeBody and LocalBody hold of b, which the caller
// releases once done with them (after the decoder's response); every
// other copy is given back by the time PrefillWithin returns, and on an
// error nothing is held.
func (x *Exchange) PrefillWithin(ctx context.Context, hostPort, path string, hdr http.Header, body []byte, b Budget) (res Result, held int64, err error) {
	return x.prefillWithin(ctx, target{hostPort: hostPort}, path, hdr, body, b)
}

// PrefillURLWithin is PrefillWithin for a prefiller its caller knows by
// its base URL (an http or https URL, with any path prefix, as
// kvroute.Endpoint.Address names an engine) rather than by host:port: the
// prefill request goes to base with path appended, so that an https
// prefiller, or one behind a path prefix, is reached as the caller reaches
// its decode endpoints; Config.PrefillerScheme is not used.
// Options.AllowTarget vets the URL's host:port (the scheme's default port
// when it names none). A base that is no such URL (another scheme, no
// host, user info, a query or a fragment) falls back as ReasonBadTarget.
func (x *Exchange) PrefillURLWithin(ctx context.Context, base, path string, hdr http.Header, body []byte, b Budget) (res Result, held int64, err error) {
	return x.prefillWithin(ctx, baseTarget(base), path, hdr, body, b)
}

// prefillWithin is PrefillWithin with the prefiller at t.
func (x *Exchange) prefillWithin(ctx context.Context, t target, path string, hdr http.Header, body []byte, b Budget) (res Result, held int64, err error) {
	if int64(len(body)) > x.cfg.MaxBodyBytes {
		// Not refused: the caller took it, and the decoder prefills it.
		t.over = fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(body), x.cfg.MaxBodyBytes)
	}
	c := &copies{budget: b}
	text, err := jsonscan.PythonJSON(body, func(n int) error { return c.take(copyText, n) })
	if err != nil {
		c.releaseAll()
		if !errors.Is(err, ErrNoRoom) {
			err = notText(err)
		}
		return Result{RequestID: requestID(hdr)}, 0, err
	}
	if res, err = x.prefillText(ctx, t, path, hdr, text, c); err != nil {
		c.releaseAll()
		return res, 0, err
	}
	if !sameArray(res.DecodeBody, text) && !sameArray(res.LocalBody, text) {
		c.release(copyText)
	}
	for k := range copyKinds { // handed over to the caller
		held += c.held[k]
		c.held[k] = 0
	}
	return res, held, nil
}
