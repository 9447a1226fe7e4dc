// Package duration is the one duration type of orchestra's configuration:
// written as a string such as "2s", "500ms" or "1m30s", or as a number of
// milliseconds (like every *_ms field of a plan), in JSON and YAML alike.
//
//	var c struct{ Timeout duration.Duration `json:"timeout"` }
//	_ = json.Unmarshal([]byte(`{"timeout": "30s"}`), &c) // c.Timeout.D() == 30 * time.Second
package duration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that configuration files write as a string
// such as "2s" or "1m30s", or as a number of milliseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText encodes d as a duration string such as "2s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a duration string such as "2s", or a bare number of
// milliseconds.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON encodes d as a JSON string such as "2s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON decodes a JSON string such as "2s", or a JSON number of
// milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.UnmarshalText([]byte(s))
	}
	return d.UnmarshalText(b)
}

// MarshalYAML encodes d as a duration string such as "2s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML decodes a YAML string such as "2s", or a YAML number of
// milliseconds. It uses the function-style interface, which every major
// YAML package for Go supports.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return d.UnmarshalText([]byte(v))
	case int:
		return d.fromMillis(float64(v))
	case int64:
		return d.fromMillis(float64(v))
	case uint64:
		return d.fromMillis(float64(v))
	case float64:
		return d.fromMillis(v)
	default:
		return fmt.Errorf("invalid duration %v: write a string such as \"2s\" or a number of milliseconds", v)
	}
}

func (d *Duration) fromMillis(ms float64) error {
	if ms < 0 || math.IsNaN(ms) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return fmt.Errorf("invalid duration %v ms: it must be a non-negative number of milliseconds", ms)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		var d Duration
		err := d.fromMillis(ms)
		return d, err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: write it like \"2s\", \"500ms\" or \"1m30s\", or as a number of milliseconds", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: it must not be negative", s)
	}
	return Duration(v), nil
}
