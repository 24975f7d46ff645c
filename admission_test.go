package kvroute

import (
	"context"
	"errors"
	"sync/atomic"
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

// abandons is an Admission that admits every request (calling leave
// first, when set: the caller leaves as it is admitted) and counts the
// Abandons it is told of.
type abandons struct {
	n     atomic.Int32
	leave func()
}

func (a *abandons) Admit(context.Context, *Request, []Endpoint) error {
	if a.leave != nil {
		a.leave()
	}
	return nil
}

func (a *abandons) Abandon(context.Context) { a.n.Add(1) }

// A request admitted and not routed is told to the admission once: a
// Selection of Match released without a (successful) Commit, as a failed
// Match or Pick; a committed one, or Pick's own Selections, are not. Before,
// Release told nothing, and the claim an admission.Controller's release of
// the request took stayed until the request's context ended or Settle.
func TestSelectionReleasedUncommittedAbandonsTheAdmissionOnce(t *testing.T) {
	a := &abandons{}
	r := testRouter(t, nil, Options{Admission: a})
	eps := endpoints(2)
	req := func(id string) *Request {
		return &Request{ID: id, Prompts: []render.Prompt{{TokenIDs: prompt(1, 640)}}}
	}
	ctx := context.Background()

	s, err := r.Match(ctx, req(""), eps)
	require.NoError(t, err)
	s.Release()
	require.EqualValues(t, 1, a.n.Load(), "released uncommitted: not routed")

	s, err = r.Match(ctx, req("x"), eps)
	require.NoError(t, err)
	d, err := s.Commit(0)
	require.NoError(t, err)
	s.Release()
	require.EqualValues(t, 1, a.n.Load(), "committed: routed")

	s, err = r.Match(ctx, req("x"), eps) // x is in flight: its Commit fails
	require.NoError(t, err)
	_, err = s.Commit(1)
	require.Error(t, err)
	s.Release()
	require.EqualValues(t, 2, a.n.Load(), "a failed Commit does not route it")
	d.Done(DoneInfo{})

	d, err = r.Pick(ctx, req(""), eps)
	require.NoError(t, err)
	d.Done(DoneInfo{})
	require.EqualValues(t, 2, a.n.Load(), "Pick's own Selections are committed or failed by Pick")

	// Admitted, then the caller left: Match fails and tells the
	// admission, once.
	cctx, cancel := context.WithCancel(ctx)
	a.leave = cancel
	_, err = r.Match(cctx, req(""), eps)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualValues(t, 3, a.n.Load(), "a failed Match is not routed")
}
