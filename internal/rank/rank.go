package rank

import (
	"math"
	"slices"
	"strings"
	"unicode"
)

// BM25's parameters: how fast a term's weight saturates with its count,
// and how much a document's length discounts it. The usual values.
const (
	k1 = 1.2
	b  = 0.75
)

// Index is a set of documents ready to be ranked. It is safe for
// concurrent use once made.
type Index struct {
	docs  []map[string]int // term counts per document
	lens  []int
	avg   float64
	df    map[string]int // documents per term
	total int
}

// New indexes docs; Top returns positions in docs.
func New(docs []string) *Index {
	ix := &Index{df: map[string]int{}, total: len(docs)}
	sum := 0
	for _, d := range docs {
		terms := Terms(d)
		counts := make(map[string]int, len(terms))
		for _, t := range terms {
			if counts[t] == 0 {
				ix.df[t]++
			}
			counts[t]++
		}
		ix.docs = append(ix.docs, counts)
		ix.lens = append(ix.lens, len(terms))
		sum += len(terms)
	}
	if len(docs) > 0 {
		ix.avg = float64(sum) / float64(len(docs))
	}
	return ix
}

// Scores returns the BM25 score of every document for query.
func (ix *Index) Scores(query string) []float64 {
	scores := make([]float64, len(ix.docs))
	seen := map[string]bool{}
	for _, q := range Terms(query) {
		if seen[q] {
			continue
		}
		seen[q] = true
		n := ix.df[q]
		if n == 0 {
			continue
		}
		idf := math.Log(1 + (float64(ix.total)-float64(n)+0.5)/(float64(n)+0.5))
		for i, counts := range ix.docs {
			f := float64(counts[q])
			if f == 0 {
				continue
			}
			norm := 1 - b + b*float64(ix.lens[i])/ix.avg
			scores[i] += idf * f * (k1 + 1) / (f + k1*norm)
		}
	}
	return scores
}

// Top returns the positions of the k documents that rank best for query,
// best first; ties keep the documents' order. Documents that share no term
// with the query come last, in their order.
func (ix *Index) Top(query string, k int) []int {
	scores := ix.Scores(query)
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case scores[x] > scores[y]:
			return -1
		case scores[x] < scores[y]:
			return 1
		}
		return 0
	})
	if k < len(order) {
		order = order[:k]
	}
	return order
}

// Terms splits text into the terms it is indexed by: lower-case words and
// numbers, identifiers split at underscores, dots, dashes and case changes
// (getWeatherForecast → get, weather, forecast), common English words left
// out, and plural s removed.
func Terms(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := strings.ToLower(string(word))
		word = word[:0]
		if stop[w] {
			return
		}
		out = append(out, stem(w))
	}
	var prev rune
	for _, r := range text {
		switch {
		case unicode.IsUpper(r):
			if unicode.IsLower(prev) || unicode.IsDigit(prev) {
				flush()
			}
			word = append(word, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			word = append(word, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// stem removes a plural ending: files → file, queries → query.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

var stop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by can do does for from get give has have how i if in
		into is it its me my of on or please that the their then this to up us use using was what when where which
		who will with you your tell find show also all any`) {
		m[w] = true
	}
	return m
}()
