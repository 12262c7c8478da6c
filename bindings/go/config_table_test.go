// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tableCase is one line of tests/data/config_table.txt.
type tableCase struct {
	id    string
	given map[string]string // option name -> text in the S3LECT_* syntax
	want  map[string]int64  // option name -> effective value (ms or a count)
	err   string            // a text the error must contain (option names)
}

// readTableLines reads one of the tables of tests/data (config_table.txt,
// env_table.txt): per case its id, its items (NAME=TEXT, trimmed, in order)
// and its result (after "want " or "error ", and whether it is an error).
func readTableLines(t *testing.T, file string, each func(id string, items []string, result string, isErr bool)) {
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, " | ", 3)
		if len(parts) != 3 {
			t.Fatalf("bad line %q", line)
		}
		var items []string
		for _, item := range strings.Split(parts[1], ";") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		msg, isErr := strings.CutPrefix(parts[2], "error ")
		if !isErr {
			msg = strings.TrimPrefix(parts[2], "want ")
		}
		each(parts[0], items, msg, isErr)
	}
}

func readConfigTable(t *testing.T) []tableCase {
	var out []tableCase
	readTableLines(t, "config_table.txt", func(id string, items []string, result string, isErr bool) {
		c := tableCase{id: id, given: map[string]string{}, want: map[string]int64{}}
		for _, item := range items {
			if k, v, ok := strings.Cut(item, "="); ok {
				c.given[k] = v
			}
		}
		if isErr {
			c.err = result
		} else {
			for _, kv := range strings.Fields(result) {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				c.want[k] = n
			}
		}
		out = append(out, c)
	})
	return out
}

// loadAndValidate runs c.LoadEnv(env) and c.Validate(). With wantErr (the
// table's text, in libs3lect's option names) it checks the error and
// returns false; else it fails the test on an error and returns true.
func loadAndValidate(t *testing.T, c *ElectorConfig, env []string, wantErr string) bool {
	t.Helper()
	err := c.LoadEnv(env)
	if err == nil {
		err = c.Validate()
	}
	if wantErr != "" {
		want := goFieldNames.Replace(wantErr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one with %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// The table of configurations through LoadEnv (S3LECT_* values, parsed by
// libs3lect) and Validate gives the values or errors C, the CLI, Python and
// Lua give. Go names fields where the library names options (LeaderTimeout
// for lease_timeout), and keeps Go s3lect's one documented default: an unset
// InfrequentInterval is FrequentInterval.
func TestConfigTable(t *testing.T) {
	cases := readConfigTable(t)
	if len(cases) < 30 {
		t.Fatalf("the table has %d cases, want at least 30", len(cases))
	}
	lock := filepath.Join(t.TempDir(), "lock.json")
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			var env []string
			for k, v := range tc.given {
				env = append(env, "S3LECT_"+strings.ToUpper(k)+"="+v)
			}
			c := ElectorConfig{LockfilePath: lock, ServerID: "n"}
			if !loadAndValidate(t, &c, env, tc.err) {
				return
			}
			for name, want := range tc.want {
				_, givenF := tc.given["frequent_interval"]
				_, givenI := tc.given["infrequent_interval"]
				if name == "infrequent_interval" && !givenF && !givenI {
					want = int64(c.FrequentInterval / time.Millisecond) // Go s3lect's default
				} else if name == "infrequent_interval" && !givenI {
					want = int64(c.FrequentInterval / time.Millisecond)
				}
				o, _ := optionNamed(name)
				f, _ := c.configField(o)
				got := f.Int()
				if o.isDuration() {
					got /= int64(time.Millisecond)
				}
				if got != want {
					t.Errorf("%s (%s) = %d, want %d", o.field, name, got, want)
				}
			}
		})
	}
}

// envCase is one line of tests/data/env_table.txt.
type envCase struct {
	id   string
	vars []string          // NAME=TEXT, as os.Environ() has them
	want map[string]string // option name -> effective value as text ("": a string not set)
	err  string            // a text the error must contain (option names)
}

func readEnvTable(t *testing.T) []envCase {
	var out []envCase
	readTableLines(t, "env_table.txt", func(id string, items []string, result string, isErr bool) {
		c := envCase{id: id, vars: items, want: map[string]string{}}
		if isErr {
			c.err = result
		} else {
			for _, kv := range strings.Fields(result) {
				k, v, _ := strings.Cut(kv, "=")
				c.want[k] = v
			}
		}
		out = append(out, c)
	})
	return out
}

// The environment table through LoadEnv (libs3lect's one map of S3LECT_*
// variables) and Validate gives the values or errors C, the CLI, Python and
// Lua give. An option ElectorConfig has no field for (notConfigFields) is
// not compared, and a case that compares nothing else is skipped, saying why.
func TestEnvTable(t *testing.T) {
	cases := readEnvTable(t)
	if len(cases) < 20 {
		t.Fatalf("the environment table has %d cases, want at least 20", len(cases))
	}
	lock := filepath.Join(t.TempDir(), "lock.json")
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			c := ElectorConfig{}
			if !strings.Contains(strings.Join(tc.vars, "\n"), "S3LECT_LOCK=") {
				c.LockfilePath = lock
			}
			if !strings.Contains(strings.Join(tc.vars, "\n"), "_ID=") {
				c.ServerID = "n"
			}
			if !loadAndValidate(t, &c, tc.vars, tc.err) {
				return
			}
			compared := 0
			for name, want := range tc.want {
				o, ok := optionNamed(name)
				if !ok {
					t.Fatalf("no option %s", name)
				}
				f, ok := c.configField(o)
				if !ok {
					t.Logf("%s: ElectorConfig has no field (%s)", name, notConfigFields[name])
					continue
				}
				var got string
				switch {
				case o.isDuration():
					got = strconv.FormatInt(f.Int()/int64(time.Millisecond), 10)
				case f.Kind() == reflect.Bool:
					got = map[bool]string{false: "0", true: "1"}[f.Bool()]
				case f.Kind() == reflect.String:
					got = f.String()
				default:
					got = strconv.FormatInt(f.Int(), 10)
				}
				if got != want {
					t.Errorf("%s (%s) = %q, want %q", o.field, name, got, want)
				}
				compared++
			}
			if compared == 0 {
				t.Skip("no option of this case has an ElectorConfig field")
			}
		})
	}
}
