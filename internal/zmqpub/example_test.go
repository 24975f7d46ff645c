package zmqpub_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/zmqpub"
)

// A publisher consumes sequence numbers from 0 whether or not anyone is
// subscribed, as vLLM does; Stats counts what it did.
func ExamplePublisher() {
	p, err := zmqpub.New(zmqpub.Config{Addr: "127.0.0.1:0", Endpoint: "10.0.0.1:8000", Model: "m"}, zmqpub.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Topic())
	for range 2 {
		seq, _ := p.Publish([]byte("one msgpack KVEventBatch"))
		fmt.Println("seq", seq)
	}
	fmt.Printf("%+v\n", p.Stats())
	fmt.Println(p.Close())
	_, err = p.Publish([]byte("late"))
	fmt.Println(err)
	// Output:
	// kv@10.0.0.1:8000@m
	// seq 0
	// seq 1
	// {Published:2 Queued:0 Dropped:0 Rejected:0 Handshakes:0 Invalid:0 Refused:0 Subscribers:0 Subscribed:0}
	// <nil>
	// kvevents: publisher closed
}
