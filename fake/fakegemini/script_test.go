package fakegemini

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"google.golang.org/genai"
)

func TestScriptServesConcurrentClientsOneStepEach(t *testing.T) {
	const n = 8
	brain := NewScript()
	for i := range n {
		brain.Push(Fixed(TextReply(fmt.Sprintf("answer %d", i), 1)))
	}
	_, base := startServer(t, brain)
	c := newClient(t, base)
	ctx := testContext(t)

	var wg sync.WaitGroup
	answers := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			resps, err := collect(c.Models.GenerateContentStream(ctx, testModel, genai.Text(fmt.Sprint("q", i)), nil))
			errs[i] = err
			if len(resps) > 0 {
				answers[i] = resps[0].Text()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	sort.Strings(answers)
	for i, a := range answers {
		if want := fmt.Sprintf("answer %d", i); a != want {
			t.Errorf("answers = %q, want each step used exactly once", answers)
			break
		}
	}
	if got := len(brain.Requests()); got != n || brain.Remaining() != 0 {
		t.Errorf("recorded %d requests with %d steps left, want %d and 0", got, brain.Remaining(), n)
	}
}

func TestScriptStepCanReadRequestAndPushMore(t *testing.T) {
	brain := NewScript()
	brain.Push(func(r *Request) Reply {
		brain.Push(Fixed(TextReply("second", 1)))
		return TextReply("you said "+r.Contents[len(r.Contents)-1].Parts[0].Text, 1)
	})
	_, base := startServer(t, brain)
	c := newClient(t, base)
	ctx := testContext(t)

	for _, want := range []string{"you said ping", "second"} {
		resps, err := collect(c.Models.GenerateContentStream(ctx, testModel, genai.Text("ping"), nil))
		if err != nil || len(resps) != 1 || resps[0].Text() != want {
			t.Fatalf("got %v, %v; want %q", resps, err, want)
		}
	}
}
