-- Each execution of a step has an id of its own (the step's exec_id in the
-- envelope); a resumed run reuses the steps that ended before and shows
-- them with the ids they ran with. '' for steps recorded before.

ALTER TABLE steps ADD COLUMN step_exec_id TEXT NOT NULL DEFAULT '';
