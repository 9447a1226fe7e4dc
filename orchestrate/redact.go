package orchestrate

// redactError cuts secrets out of e's message (Options.Redact).
func (r *run) redactError(e *Error) {
	if e != nil && r.e.opts.Redact != nil {
		e.Message = r.e.opts.Redact(e.Message)
	}
}

// redactIssues cuts secrets out of the messages of issues.
func (r *run) redactIssues(issues []*Issue) {
	if r.e.opts.Redact == nil {
		return
	}
	for _, is := range issues {
		is.Message = r.e.opts.Redact(is.Message)
	}
}
