package session

import "github.com/turnstile-gw/turnstile/loopdetect"

// loopStateMax bounds how many sessions the loop-detection view lists.
const loopStateMax = 50

// loopState is the loop-detection view of /metrics/summary: per live
// session (at most loopStateMax), the counts its last turns hold; and, over
// every live session, how many hold loop state (activeSessions) and how
// many turns they hold in all (totalTurnsTracked), the seed's two figures.
// It shows counts only, never arguments.
func (m *Manager) loopState() any {
	m.mu.Lock()
	conns := make([]*session, 0, len(m.live))
	for _, s := range m.live {
		conns = append(conns, s)
	}
	m.mu.Unlock()
	out := make(map[string]any, min(len(conns), loopStateMax))
	active, turns := 0, 0
	for _, s := range conns {
		state := []loopdetect.TurnState{} // a session that took no turn holds none
		if cv := s.conv.Load(); cv != nil {
			state = cv.LoopState()
		}
		if n := len(state); n > 0 {
			active++
			turns += n
		}
		if len(out) < loopStateMax {
			out[s.st.record().ID] = state
		}
	}
	return map[string]any{"sessions": out, "liveSessions": m.Active(),
		"activeSessions": active, "totalTurnsTracked": turns}
}
