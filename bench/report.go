package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// report writes tables to the terminal and CSV files and plots to dir.
type report struct {
	w   io.Writer
	dir string
}

// table prints rows under header and writes them to name.csv.
func (r *report) table(name string, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(r.dir, name+".csv"))
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write(header)
	_ = cw.WriteAll(rows)
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// series is one line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// linePlot saves a plot of lines with points as name.svg.
func (r *report) linePlot(name, title, xLabel, yLabel string, logX bool, lines ...series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, l := range lines {
		args = append(args, l.name, l.xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Add(plotter.NewGrid())
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(r.dir, name+".svg"))
}

// scatterPlot saves points of several groups, and the line y = x, as name.svg.
func (r *report) scatterPlot(name, title, xLabel, yLabel string, groups ...series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	maxX := 0.0
	for i, g := range groups {
		s, err := plotter.NewScatter(g.xy)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = plotutil.Color(i)
		s.GlyphStyle.Shape = plotutil.Shape(i)
		s.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(s)
		p.Legend.Add(g.name, s)
		for _, pt := range g.xy {
			maxX = math.Max(maxX, pt.X)
		}
	}
	ideal := plotter.NewFunction(func(x float64) float64 { return x })
	ideal.Color = color.Gray{Y: 128}
	ideal.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	ideal.XMin, ideal.XMax = 0, maxX
	p.Add(ideal)
	p.Legend.Add("critical path (ideal)", ideal)
	p.Add(plotter.NewGrid())
	return p.Save(16*vg.Centimeter, 12*vg.Centimeter, filepath.Join(r.dir, name+".svg"))
}

// barPlot saves grouped bars as name.svg: one group of bars per series,
// one bar per category.
func (r *report) barPlot(name, title, yLabel string, categories []string, groups ...series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	w := vg.Points(18)
	for i, g := range groups {
		vals := make(plotter.Values, len(g.xy))
		for j, pt := range g.xy {
			vals[j] = pt.Y
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(len(groups)-1)/2) * w
		p.Add(b)
		p.Legend.Add(g.name, b)
	}
	p.NominalX(categories...)
	p.Add(plotter.NewGrid())
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(r.dir, name+".svg"))
}

// stats summarizes durations.
type stats struct {
	n              int
	mean, p50, p99 time.Duration
	min, max       time.Duration
}

func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)] }
	return stats{n: len(s), mean: sum / time.Duration(len(s)), p50: q(0.50), p99: q(0.99), min: s[0], max: s[len(s)-1]}
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.2f", float64(d)/1e6) }
func msf(d time.Duration) float64 { return float64(d) / 1e6 }
func f1(x float64) string         { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string         { return fmt.Sprintf("%.2f", x) }
func itoa(n int) string           { return fmt.Sprintf("%d", n) }
