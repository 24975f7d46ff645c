package kvevents

// TopicObserver is told which model an endpoint's KV-event topic names
// (kv@<ip:port>@<model>; "" when the topic names none). A router keys every
// event by its configured model, so it uses this to detect, per endpoint, an
// engine that publishes under another name (a served-model alias or the wrong
// model): requests that name that model would never match the index.
//
// It is called from the subscriber's receive path when an endpoint's topic
// changes (its first message, and whenever the topic differs from the
// previous one), so it must return quickly and must not call back into the
// Pool. In bind mode the endpoint is the one the topic names, which may be
// an endpoint that was never passed to Ensure.
type TopicObserver func(endpoint, topicModel string)

// ObserveTopics sets the pool's TopicObserver (nil removes it). Set it before
// the first Ensure to see every endpoint's first topic.
func (p *Pool) ObserveTopics(fn TopicObserver) {
	if fn == nil {
		p.topicObs.Store(nil)
		return
	}
	p.topicObs.Store(&fn)
}

// topicSeen reports a new topic model of endpoint to the observer, if any.
func (p *Pool) topicSeen(endpoint, model string) {
	if fn := p.topicObs.Load(); fn != nil {
		(*fn)(endpoint, model)
	}
}
