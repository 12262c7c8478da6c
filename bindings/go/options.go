// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import (
	"reflect"
	"sort"
	"strings"
	"time"
	"unsafe"
)

// The option types of s3lect_option_info.
var (
	typStr   = C.int(C.S3LECT_OPTION_STR)
	typInt   = C.int(C.S3LECT_OPTION_INT)
	typBool  = C.int(C.S3LECT_OPTION_BOOL)
	typBytes = C.int(C.S3LECT_OPTION_BYTES)
)

// optionInfo is one libs3lect option as s3lect_option_info describes it.
type optionInfo struct {
	opt      C.s3lect_option
	name     string // libs3lect's name, e.g. "lease_timeout"
	typ      C.int  // S3LECT_OPTION_STR, _INT, _BOOL or _BYTES
	min, max int64  // the bounds s3lect_config_set_int enforces (durations: ms)
	def      int64  // a new configuration's value (durations: ms)
	field    string // the ElectorConfig field that sets it; "" if none (notConfigFields)
	unit     string // integer options only: unitMs, unitCount, or "" if unknown
	flags    C.int  // s3lect_option_flags: unit, secret, run time, process-wide
}

// The units of libs3lect's integer options.
const (
	unitMs    = "ms"    // a duration: a time.Duration field, set in whole milliseconds
	unitCount = "count" // a plain count: an int field
)

// isDuration and isCount tell an integer option's unit.
func (o optionInfo) isDuration() bool { return o.typ == typInt && o.unit == unitMs }
func (o optionInfo) isCount() bool    { return o.typ == typInt && o.unit == unitCount }

// libOptions is libs3lect's option table, read once: names, types, bounds
// and defaults are not repeated here. ElectorConfig's fields stay static;
// TestOptionsCoverEveryLibraryOption fails when the library has an option
// that no field sets and notConfigFields does not explain.
var libOptions = loadOptions()

// notConfigFields are the library options ElectorConfig deliberately has no
// field for, and why.
var notConfigFields = map[string]string{
	"poll_mode":       "the binding runs hooks on the callback threads of libs3lect's shared runtime",
	"release_on_stop": "Stop releases the lock and StopWithoutRelease does not, per call",
}

// goRenames are the fields whose names follow the Go s3lect package rather
// than libs3lect's option name.
var goRenames = map[string]string{
	"lock":          "LockfilePath",
	"lease_timeout": "LeaderTimeout",
	"peer_ca":       "PeerCACert",
}

// goInitialisms are the words spelled in capitals in Go names.
var goInitialisms = map[string]string{"id": "ID", "ca": "CA"}

// goFieldName maps a libs3lect option name to its ElectorConfig field name:
// "server_id" -> "ServerID", "ca_file" -> "CAFile", "peer_ca" -> "PeerCACert".
func goFieldName(name string) string {
	if f, ok := goRenames[name]; ok {
		return f
	}
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if up, ok := goInitialisms[w]; ok {
			b.WriteString(up)
		} else if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

func loadOptions() []optionInfo {
	n := int(C.s3lect_option_count())
	out := make([]optionInfo, 0, n)
	for opt := 1; opt <= n; opt++ {
		var name *C.char
		var typ C.int
		var lo, hi, def C.int64_t
		if C.s3lect_option_info(C.int(opt), &name, &typ, &lo, &hi, &def) != C.S3LECT_OK {
			continue // the library promises no gaps; the test checks it
		}
		o := optionInfo{opt: C.s3lect_option(opt), name: C.GoString(name), typ: typ,
			min: int64(lo), max: int64(hi), def: int64(def)}
		// The unit is libs3lect's fact (s3lect_option_flags), not a list kept here.
		o.flags = C.s3lect_option_flags(C.int(opt))
		switch {
		case typ != typInt || o.flags < 0:
		case o.flags&C.S3LECT_OPTION_UNIT_MS != 0:
			o.unit = unitMs
		case o.flags&C.S3LECT_OPTION_UNIT_COUNT != 0:
			o.unit = unitCount
		}
		if _, skip := notConfigFields[o.name]; !skip {
			o.field = goFieldName(o.name)
		}
		out = append(out, o)
	}
	return out
}

// optionNamed returns the option called name (libs3lect's name).
func optionNamed(name string) (optionInfo, bool) {
	for _, o := range libOptions {
		if o.name == name {
			return o, true
		}
	}
	return optionInfo{}, false
}

// durationDefault is libs3lect's default of a duration (ms) option.
func durationDefault(name string) time.Duration {
	o, _ := optionNamed(name)
	return time.Duration(o.def) * time.Millisecond
}

// configField returns the ElectorConfig field that sets o, if the struct
// has one of the Go type that o's type needs.
func (c *ElectorConfig) configField(o optionInfo) (reflect.Value, bool) {
	if o.field == "" {
		return reflect.Value{}, false
	}
	v := reflect.ValueOf(c).Elem().FieldByName(o.field)
	if t := goTypeOf(o); t == nil || !v.IsValid() || v.Type() != t {
		return reflect.Value{}, false
	}
	return v, true
}

// goTypeOf is the Go type of the field for option o: time.Duration for a
// duration, int for a count, nil for an integer option of unknown unit or
// an unknown type.
func goTypeOf(o optionInfo) reflect.Type {
	switch o.typ {
	case C.S3LECT_OPTION_INT:
		switch o.unit {
		case unitMs:
			return reflect.TypeOf(time.Duration(0))
		case unitCount:
			return reflect.TypeOf(0)
		}
		return nil
	case C.S3LECT_OPTION_STR:
		return reflect.TypeOf("")
	case C.S3LECT_OPTION_BOOL:
		return reflect.TypeOf(false)
	case C.S3LECT_OPTION_BYTES:
		return reflect.TypeOf([]byte(nil))
	}
	return nil
}

// newFieldNames builds the replacer that rewrites libs3lect's option names
// in its messages into the field names a Go user sets. Only names with an
// underscore are rewritten: "lock", "region" or "endpoint" are also plain
// words of the messages (a one-word integer option only in its range
// message). Longer names go first ("peer_client_cert" before
// "peer_cert"... and "max_lease_timeout" before "lease_timeout").
func newFieldNames() *strings.Replacer {
	var opts []optionInfo
	for _, o := range libOptions {
		if o.field != "" && strings.Contains(o.name, "_") {
			opts = append(opts, o)
		}
	}
	sort.SliceStable(opts, func(i, j int) bool { return len(opts[i].name) > len(opts[j].name) })
	pairs := make([]string, 0, 2*len(libOptions)+2)
	for _, o := range opts {
		pairs = append(pairs, o.name, o.field)
	}
	// A one-word name only where the library's range message names it
	// ("priority must be between 0 and 1000000, got -1").
	for _, o := range libOptions {
		if o.field != "" && !strings.Contains(o.name, "_") && o.typ == typInt {
			pairs = append(pairs, o.name+" must be between", o.field+" must be between")
		}
	}
	pairs = append(pairs, "set lock to", "set LockfilePath to")
	return strings.NewReplacer(pairs...)
}

// readCOption reads option o back from a C config: int64 for ints (ms or a count), 0/1
// (or -1: automatic) for bools, string for strings and bytes. The tests use
// it to check that every field reaches the library.
func readCOption(p *C.s3lect_config, o optionInfo) any {
	switch o.typ {
	case C.S3LECT_OPTION_INT, C.S3LECT_OPTION_BOOL:
		var v C.int64_t
		if C.s3lect_config_get_int(p, o.opt, &v) != C.S3LECT_OK {
			return nil
		}
		return int64(v)
	default:
		n := C.s3lect_config_get_str(p, o.opt, nil, 0)
		if n < 0 {
			return nil
		}
		buf := C.malloc(C.size_t(n) + 1)
		defer C.free(buf)
		C.s3lect_config_get_str(p, o.opt, (*C.char)(buf), C.size_t(n)+1)
		return C.GoString((*C.char)(unsafe.Pointer(buf)))
	}
}

// setAndRead sets option o alone from c on a new C config and reads it
// back (readCOption). The tests use it.
func setAndRead(c *ElectorConfig, o optionInfo) (any, error) {
	cc := &cconfig{p: C.s3lect_config_new()}
	if cc.p == nil {
		return nil, &Error{Code: CodeNoMemory, Op: "config"}
	}
	defer C.s3lect_config_free(cc.p)
	cc.setOption(c, o)
	if cc.err != nil {
		return nil, cc.err
	}
	return readCOption(cc.p, o), nil
}

// electorOption reads option o back from the elector's configuration in
// libs3lect (s3lect_get_config), as readCOption does. The tests use it.
func (e *S3Elector) electorOption(o optionInfo) any {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	if e.c == nil {
		return nil
	}
	p := C.s3lect_get_config(e.c)
	if p == nil {
		return nil
	}
	defer C.s3lect_config_free(p)
	return readCOption(p, o)
}
