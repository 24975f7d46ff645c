package kvroute

import (
	"context"
	"errors"
	"testing"

	"github.com/kvroute/kvroute/render"
	"github.com/stretchr/testify/require"
)

// gate is an Admission that refuses requests without an ID and makes the
// others wait until it is opened (or their context ends).
type gate struct {
	open    chan struct{}
	waiting chan struct{}
}

var errNoID = errors.New("no request ID")

func (g *gate) Admit(ctx context.Context, req *Request, _ []Endpoint) error {
	if req.ID == "" {
		return errNoID
	}
	g.waiting <- struct{}{}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The admission runs before anything of the request is rendered or
// accounted: a refusal fails Pick and Match with its error, a waiting
// admission holds Pick until it admits, and an ended context ends the wait.
func TestAdmissionRefusesAndWaits(t *testing.T) {
	g := &gate{open: make(chan struct{}), waiting: make(chan struct{}, 4)}
	r := testRouter(t, nil, Options{Admission: g})
	eps := endpoints(2)
	req := func(id string) *Request {
		return &Request{ID: id, Prompts: []render.Prompt{{TokenIDs: prompt(1, 640)}}}
	}

	_, err := r.Pick(context.Background(), req(""), eps)
	require.ErrorIs(t, err, errNoID)
	_, err = r.Match(context.Background(), req(""), eps)
	require.ErrorIs(t, err, errNoID)
	_, err = r.Pick(context.Background(), req("x"), nil)
	require.ErrorIs(t, err, ErrNoEndpoints, "the request's own checks come first")
	for _, e := range eps {
		tok, reqs, _ := r.load.Load(e.ID)
		require.Zero(t, tok+reqs, "nothing accounted for refused requests")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := r.Pick(ctx, req("a"), eps); errc <- err }()
	<-g.waiting
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	type result struct {
		d   *Decision
		err error
	}
	done := make(chan result, 1)
	go func() { d, err := r.Pick(context.Background(), req("b"), eps); done <- result{d, err} }()
	<-g.waiting
	close(g.open)
	res := <-done
	require.NoError(t, res.err)
	require.Same(t, res.d, r.Decision("b"))
	res.d.Done(DoneInfo{})
}
