package hostile

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Markers of the generated section of RELIABILITY.md.
const (
	matrixBegin = "<!-- BEGIN GENERATED: hostile matrix -->"
	matrixEnd   = "<!-- END GENERATED: hostile matrix -->"
)

// transportsOf names where an entry's cases run.
func transportsOf(e entry) string {
	switch e.via {
	case "request":
		return "stdio, HTTP"
	case "http":
		return "HTTP"
	case "process":
		return "HTTP (a server each)"
	}
	return "CLI"
}

// matrixMarkdown is the matrix of entry points and shapes: how many cases
// each cell has, or why the shape does not apply, and the counts.
func matrixMarkdown() string {
	all := append(requestCases(), otherCases()...)
	count := map[string]int{}
	for _, c := range all {
		count[c.entry+"/"+string(c.shape)]++
	}
	var b strings.Builder
	b.WriteString("| entry point | runs over |")
	for _, s := range shapes {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(shapes)) + "\n")
	var notes []string
	cases, runs, na := 0, 0, 0
	for _, e := range entries {
		fmt.Fprintf(&b, "| `%s` | %s |", e.id, transportsOf(e))
		per := 1
		if e.via == "request" {
			per = 2
		}
		for _, s := range shapes {
			n := count[e.id+"/"+string(s)]
			switch {
			case n > 0:
				fmt.Fprintf(&b, " %d |", n)
				cases += n
				runs += n * per
			default:
				na++
				notes = append(notes, fmt.Sprintf("`%s` %s: %s", e.id, s, e.na[s]))
				b.WriteString(" n/a |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d entry points × %d shapes: %d cells hold %d cases (%d runs, a request case over both stdio and HTTP); %d cells do not apply:\n\n",
		len(entries), len(shapes), len(entries)*len(shapes)-na, cases, runs, na)
	slices.Sort(notes)
	for _, n := range notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// rewriteReliability rewrites the generated matrix section of path.
func rewriteReliability(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, matrixBegin), strings.Index(s, matrixEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", path, matrixBegin, matrixEnd)
	}
	s = s[:i+len(matrixBegin)] + "\n" + matrixMarkdown() + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
