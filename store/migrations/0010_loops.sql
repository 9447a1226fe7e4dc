-- A paused run keeps the tool loops of its steps that paused it (an
-- agent's loop that handed client-final calls to the client): each
-- loop's messages, results, counts and turn, so that a resume goes on
-- without running a model turn or a tool call twice. Cleared with the
-- pause when the run is claimed.

ALTER TABLE resumable ADD COLUMN loops TEXT; -- JSON: {step id: {state, calls}}, while paused
