package zmqx_test

import (
	"context"
	"fmt"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// A replay-style exchange: a server socket built on Listener answers a
// go-zeromq DEALER that dials through the guarded transport.
func ExampleListen() {
	ctx := context.Background()
	l, err := zmqx.Listen(ctx, "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	d := zmqx.NewDealer(ctx, zmqx.Options{IdleTimeout: zmqx.DefaultHandshakeTimeout}, nil)
	defer zmqx.CloseDrain(d)
	if err := zmqx.Dial(d, l.Endpoint()); err != nil {
		fmt.Println(err)
		return
	}
	c, err := l.Accept()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	_ = d.Send(zmq4.NewMsgFrom([]byte{}, []byte("hello")))
	req, _ := c.ReadMsg()
	fmt.Printf("server got %q from a %s\n", req.Frames[1], c.PeerType())
	_ = c.WriteMsg([]byte{}, []byte("world"))
	rep, _ := d.Recv()
	fmt.Printf("client got %q\n", rep.Frames[1])

	ep, _ := zmqx.Endpoint("tcp://10.0.0.7:5556")
	fmt.Println(ep)
	// Output:
	// server got "hello" from a DEALER
	// client got "world"
	// tcpx://10.0.0.7:5556
}
