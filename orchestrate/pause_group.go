package orchestrate

// endedBefore reports whether s ended before a resume: its record is kept.
func (r *run) endedBefore(s *Step) bool {
	if len(r.ps.reuse) == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records[s].ended
}

// groupWaits handles the children of group g that wait for the client,
// once every child that could run has: while the group's outcome is open,
// the group waits too (and reports true); when it settled (a child failed,
// a race was won, the run stopped), they are abandoned.
func (r *run) groupWaits(g *Step, settled bool) bool {
	var waiting []*Step
	for _, c := range g.Parallel {
		if r.waits(c) {
			waiting = append(waiting, c)
		}
	}
	if len(waiting) == 0 {
		return false
	}
	if settled {
		for _, c := range waiting {
			r.abandon(c)
		}
		return false
	}
	r.mu.Lock()
	r.records[g].Status = StatusAwaitingClient
	r.mu.Unlock()
	return true
}
