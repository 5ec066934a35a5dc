package server

import "time"

// logEvery is how often one kind of refusal or failure may be logged per
// node: a client (or an outage) causing thousands must not cause thousands
// of log lines. Metrics count every one.
const logEvery = time.Minute
