package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTheTicketAPIWantsItsKeyAndATitle(t *testing.T) {
	srv := httptest.NewServer(&service{key: "dev-key"})
	defer srv.Close()
	post := func(auth, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tickets", strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := post("Bearer wrong", `{"title":"x"}`); code != http.StatusUnauthorized {
		t.Errorf("wrong key: %d, want 401", code)
	}
	if code, _ := post("Bearer dev-key", `{}`); code != http.StatusBadRequest {
		t.Errorf("no title: %d, want 400", code)
	}
	code, body := post("Bearer dev-key", `{"title":"printer on fire"}`)
	if code != http.StatusCreated || !strings.Contains(body, `"id":"T-1001"`) || !strings.Contains(body, `"status":"open"`) {
		t.Errorf("created: %d %s", code, body)
	}
	if code, body := post("Bearer dev-key", `{"title":"second"}`); code != http.StatusCreated || !strings.Contains(body, `"T-1002"`) {
		t.Errorf("second ticket: %d %s", code, body)
	}
}
