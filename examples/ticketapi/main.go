// Command ticketapi is a tiny ticket service for trying the example HTTP
// tool examples/tools/create_ticket offline: it answers POST /tickets with a
// new ticket id when the request carries "Authorization: Bearer
// $TICKETS_API_KEY". It keeps tickets in memory and listens on loopback.
//
//	TICKETS_API_KEY=dev-key go run ./examples/ticketapi
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync"
	"time"
)

// ticket is what the service stores and answers.
type ticket struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Details string `json:"details,omitempty"`
	Status  string `json:"status"`
}

// service is the in-memory ticket store behind the HTTP handler.
type service struct {
	key     string
	mu      sync.Mutex
	tickets []ticket
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path != "/tickets":
		answer(w, http.StatusNotFound, map[string]string{"message": "no such endpoint; POST /tickets"})
	case r.Method != http.MethodPost:
		answer(w, http.StatusMethodNotAllowed, map[string]string{"message": "use POST"})
	case r.Header.Get("Authorization") != "Bearer "+s.key:
		answer(w, http.StatusUnauthorized, map[string]string{"message": "missing or wrong API key"})
	default:
		var in ticket
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil || in.Title == "" {
			answer(w, http.StatusBadRequest, map[string]string{"message": "send a JSON object with a title"})
			return
		}
		s.mu.Lock()
		t := ticket{ID: fmt.Sprintf("T-%d", 1000+len(s.tickets)+1), Title: in.Title, Details: in.Details, Status: "open"}
		s.tickets = append(s.tickets, t)
		s.mu.Unlock()
		log.Printf("created %s: %q", t.ID, t.Title)
		answer(w, http.StatusCreated, t)
	}
}

func answer(w http.ResponseWriter, code int, v any) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "listen address (the example manifest calls http://127.0.0.1:8089/tickets)")
	flag.Parse()
	key := os.Getenv("TICKETS_API_KEY")
	if key == "" {
		log.Fatal("set TICKETS_API_KEY (the gateway sends it as the bearer token), e.g. TICKETS_API_KEY=dev-key")
	}
	srv := &http.Server{Addr: *addr, Handler: &service{key: key}, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("ticket API on http://%s/tickets", *addr)
	log.Fatal(srv.ListenAndServe())
}
