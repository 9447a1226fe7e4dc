package orchestrate

import "github.com/orchestra-mcp/orchestra/fsm"

// reused marks the top-level steps that ended before a resume as started
// and finished: the run does not start them again.
func (sc *scheduler) reused() {
	if len(sc.r.ps.reuse) == 0 {
		return
	}
	r := sc.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.plan.Steps {
		if r.records[s].ended {
			sc.started[i], sc.finished[i] = true, true
		}
	}
}

// wait notes that top-level step s waits for the client: the steps that
// need it do not start, and neither does anything after it in the
// sequential schedule. When the run stops meanwhile, s is abandoned.
func (sc *scheduler) wait(s *Step) {
	r := sc.r
	if !r.dispatching() {
		r.abandon(s)
		return
	}
	sc.finished[s.index] = false
	sc.blocked = true
	if s.IsGroup() {
		r.fire(fsm.EventParallelComplete)
	}
	r.fire(fsm.EventClientCall)
}
