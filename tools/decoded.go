package tools

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// A server decodes each call's arguments once, for its own checks, policy and audit; handing them to the tools
// in the context spares the tools a second parse of the same JSON (for a 1 MiB e2b_write_file, a second pass over
// a megabyte). bindDecoded fills an argument struct from them exactly as encoding/json fills it from the JSON;
// anything it cannot bind that way is left to bindArgs, which parses the JSON and words the error.

type decodedArgsKey struct{}

// WithDecodedArgs hands the tools a call's arguments as decoded from its JSON with json.Decoder.UseNumber:
// objects as map[string]any, arrays as []any, numbers as json.Number.
func WithDecodedArgs(ctx context.Context, args map[string]any) context.Context {
	return context.WithValue(ctx, decodedArgsKey{}, args)
}

func decodedArgs(ctx context.Context) (map[string]any, bool) {
	m, ok := ctx.Value(decodedArgsKey{}).(map[string]any)
	return m, ok
}

// bindDecoded fills *args (a struct) from m; false means it did not (a value of the wrong type, a name that is
// not exactly a field's, a kind it does not handle), and args must then be bound from the JSON.
func bindDecoded(m map[string]any, args any) bool {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	return setDecoded(v.Elem(), m)
}

// setDecoded stores x in v as encoding/json would store the JSON value x was decoded from.
func setDecoded(v reflect.Value, x any) bool {
	if x == nil {
		// JSON null leaves the value as it is, and sets a pointer, map, slice or interface to nil.
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			v.SetZero()
		}
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return setDecoded(v.Elem(), x)
	case reflect.Interface:
		if v.NumMethod() != 0 {
			return false
		}
		v.Set(reflect.ValueOf(x))
		return true
	case reflect.String:
		s, ok := x.(string)
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Bool:
		b, ok := x.(bool)
		if ok {
			v.SetBool(b)
		}
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v.OverflowInt(i) {
			return false
		}
		v.SetInt(i)
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || v.OverflowUint(u) {
			return false
		}
		v.SetUint(u)
		return true
	case reflect.Float32, reflect.Float64:
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(string(n), v.Type().Bits())
		if err != nil || v.OverflowFloat(f) {
			return false
		}
		v.SetFloat(f)
		return true
	case reflect.Slice:
		a, ok := x.([]any)
		if !ok {
			return false
		}
		s := reflect.MakeSlice(v.Type(), len(a), len(a))
		for i, e := range a {
			if !setDecoded(s.Index(i), e) {
				return false
			}
		}
		v.Set(s)
		return true
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok || v.Type().Key().Kind() != reflect.String {
			return false
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(m)))
		}
		for k, e := range m {
			ev := reflect.New(v.Type().Elem()).Elem()
			if !setDecoded(ev, e) {
				return false
			}
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), ev)
		}
		return true
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return false
		}
		fields := jsonFields(v.Type())
		for name, e := range m {
			i, ok := fields[name]
			if !ok {
				// encoding/json matches names case-insensitively and ignores unknown ones: leave that to it.
				return false
			}
			if !setDecoded(v.Field(i), e) {
				return false
			}
		}
		return true
	}
	return false
}

// jsonFields maps the JSON names of t's exported fields to their indexes (embedded structs are not used in
// argument structs, and a struct that has one is bound from the JSON).
func jsonFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = i
	}
	return fields
}
