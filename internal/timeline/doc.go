// Package timeline lays out the steps of a run on a time axis, the one
// layout that the web viewer draws as SVG and `orchestra executions ID`
// as text: the steps in plan order (a group's children and a loop's
// iterations under it, with their nesting depth), and each started step a
// bar from its start to its end on an axis from the run's start to its
// end, so that steps that ran side by side overlap and a wait is a gap.
//
// It works on plain values ([Step]) and imports nothing of orchestra's.
//
//	steps := []timeline.Step{{Path: "plan.steps[0]", Start: t0, Duration: time.Second}}
//	axis := timeline.NewAxis(runStart, timeline.Latest(runEnd, steps))
//	for _, n := range timeline.Order(steps) {
//		if from, to, ok := axis.Bar(steps[n.I]); ok {
//			draw(n.Depth, from*width, (to-from)*width)
//		}
//	}
package timeline
