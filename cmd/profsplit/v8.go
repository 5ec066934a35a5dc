package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// v8Profile is the .cpuprofile format (Chrome DevTools' Profiler.Profile):
// a call tree of nodes, and the node of every sample with the time since
// the one before.
type v8Profile struct {
	Nodes []struct {
		ID        int `json:"id"`
		CallFrame struct {
			FunctionName string `json:"functionName"`
			URL          string `json:"url"`
		} `json:"callFrame"`
		Children []int `json:"children"`
	} `json:"nodes"`
	StartTime  int64   `json:"startTime"` // µs
	EndTime    int64   `json:"endTime"`
	Samples    []int   `json:"samples"`
	TimeDeltas []int64 `json:"timeDeltas"` // µs
}

// splitV8 splits a V8 profile. A sample stands for the time until the next
// one; "(idle)" samples (the event loop waiting) are not CPU and are left
// out, as "(root)" is.
func splitV8(r io.Reader) (*split, error) {
	var p v8Profile
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return nil, fmt.Errorf("not a V8 .cpuprofile: %w", err)
	}
	if len(p.Samples) == 0 || len(p.TimeDeltas) != len(p.Samples) {
		return nil, fmt.Errorf("no samples in the profile")
	}
	frames := make(map[int]v8Frame, len(p.Nodes))
	parent := make(map[int]int, len(p.Nodes))
	for _, n := range p.Nodes {
		frames[n.ID] = v8Frame{name: n.CallFrame.FunctionName, url: n.CallFrame.URL}
		for _, c := range n.Children {
			parent[c] = n.ID
		}
	}
	parts := make(map[int]string)
	s := newSplit()
	s.duration = time.Duration(p.EndTime-p.StartTime) * time.Microsecond
	for i, id := range p.Samples {
		var d time.Duration
		if i+1 < len(p.TimeDeltas) {
			d = time.Duration(p.TimeDeltas[i+1]) * time.Microsecond
		} else {
			// The last sample lasts until the profile's end.
			d = time.Duration(p.EndTime-p.StartTime)*time.Microsecond - sumDeltas(p.TimeDeltas)
		}
		f := frames[id]
		if f.name == "(idle)" || f.name == "(root)" || d <= 0 {
			continue
		}
		part, ok := parts[id]
		if !ok {
			var stack []v8Frame
			for n, seen := id, 0; seen < len(p.Nodes); seen++ {
				fr := frames[n]
				if fr.name == "(root)" {
					break
				}
				stack = append(stack, fr)
				pn, ok := parent[n]
				if !ok {
					break
				}
				n = pn
			}
			part = classifyV8(stack)
			parts[id] = part
		}
		s.add(part, d)
	}
	if s.total == 0 {
		return nil, fmt.Errorf("no CPU samples in the profile (all idle)")
	}
	return s, nil
}

func sumDeltas(ds []int64) time.Duration {
	var t int64
	for _, d := range ds {
		t += d
	}
	return time.Duration(t) * time.Microsecond
}
