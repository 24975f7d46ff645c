// Package regtest checks kvroute's metric registration policy in tests:
// a component built with a registerer registers its collectors, its Close
// unregisters exactly those (a second Close does nothing), and the same
// component can then be built again on the same registry, as a router
// rebuilt on a configuration change is.
//
// Every package with metrics has such a test; this package is their one
// copy of the cycle, of counting what a registry gathers, and of reading a
// labelled metric's series by label (ByLabel). It adds no
// module dependency (testify is already the tests').
package regtest
