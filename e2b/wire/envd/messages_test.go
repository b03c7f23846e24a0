package envd_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// messages are the package's types, each with the messages of envd's it stands for. The types of their members
// (ProcessEvent, EntryInfo...) are checked through them.
var messages = []struct {
	value  any
	protos []string
}{
	{envd.StartRequest{}, []string{"process.StartRequest"}},
	{envd.ProcessRequest{}, []string{"process.ConnectRequest", "process.CloseStdinRequest"}},
	{envd.EventMessage{}, []string{"process.StartResponse", "process.ConnectResponse"}},
	{envd.ListRequest{}, []string{"process.ListRequest"}},
	{envd.ListResponse{}, []string{"process.ListResponse"}},
	{envd.SendSignalRequest{}, []string{"process.SendSignalRequest"}},
	{envd.SendInputRequest{}, []string{"process.SendInputRequest"}},
	{envd.PathRequest{}, []string{"filesystem.StatRequest", "filesystem.MakeDirRequest", "filesystem.RemoveRequest"}},
	{envd.EntryResponse{}, []string{"filesystem.StatResponse", "filesystem.MakeDirResponse",
		"filesystem.MoveResponse"}},
	{envd.ListDirRequest{}, []string{"filesystem.ListDirRequest"}},
	{envd.ListDirResponse{}, []string{"filesystem.ListDirResponse"}},
	{envd.MoveRequest{}, []string{"filesystem.MoveRequest"}},
}

// Each type has exactly the members of envd's message, under their JSON names and in their order, each of a type
// that encodes as protojson encodes the field: a field with presence (optional, in a oneof, a message) a pointer,
// sent whenever it is set; any other field left out at its zero value, as envd leaves it out.
func TestMessagesHaveEnvdsMembers(t *testing.T) {
	files := loadDescriptors(t)
	for _, m := range messages {
		for _, name := range m.protos {
			t.Run(name, func(t *testing.T) {
				checkMembers(t, name, reflect.TypeOf(m.value), message(t, files, name))
			})
		}
	}
}

var (
	int32Type  = reflect.TypeFor[envd.Int32]()
	uint32Type = reflect.TypeFor[envd.Uint32]()
	int64Type  = reflect.TypeFor[envd.Int64]()
	bytesType  = reflect.TypeFor[envd.Bytes]()
	unmarshals = reflect.TypeFor[json.Unmarshaler]()
)

// jsonMember is a field of a Go struct as encoding/json sees it.
type jsonMember struct {
	field     reflect.StructField
	index     int
	omitempty bool
}

func jsonMembers(gt reflect.Type) map[string]jsonMember {
	members := map[string]jsonMember{}
	for i := range gt.NumField() {
		f := gt.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		members[name] = jsonMember{field: f, index: len(members), omitempty: hasOption(opts, "omitempty")}
	}
	return members
}

func hasOption(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

func checkMembers(t *testing.T, path string, gt reflect.Type, md protoreflect.MessageDescriptor) {
	t.Helper()
	if gt.Kind() != reflect.Struct {
		t.Errorf("%s is a %s, want a struct for envd's %s", path, gt, md.FullName())
		return
	}
	members := jsonMembers(gt)
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.JSONName()
		where := path + "." + name
		m, ok := members[name]
		if !ok {
			t.Errorf("%s (%s) has no member %q: envd's %s has it", path, gt, name, md.FullName())
			continue
		}
		delete(members, name)
		if m.index != i {
			t.Errorf("%s is member %d of %s, envd sends it as member %d", where, m.index, gt, i)
		}
		if !m.omitempty {
			t.Errorf("%s is not omitempty: envd leaves it out when it is not set", where)
		}
		ft := m.field.Type
		// A timestamp is a string, never empty when set: unset is the empty string, which omitempty leaves out.
		timestamp := fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Timestamp"
		switch presence := fd.HasPresence() && !fd.IsList() && !fd.IsMap() && !timestamp; {
		case presence && ft.Kind() != reflect.Pointer:
			t.Errorf("%s is a %s: envd sends it whenever it is set, even to its zero value (it is optional, in a "+
				"oneof or a message), so it must be a pointer", where, ft)
			continue
		case !presence && ft.Kind() == reflect.Pointer:
			t.Errorf("%s is a %s: envd leaves it out at its zero value, so it must not be a pointer", where, ft)
			continue
		case presence:
			ft = ft.Elem()
		}
		switch {
		case fd.IsMap():
			if ft.Kind() != reflect.Map || ft.Key().Kind() != reflect.String || ft.Elem().Kind() != reflect.String ||
				fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
				t.Errorf("%s is a %s, envd's is a map<%s, %s>", where, ft, fd.MapKey().Kind(), fd.MapValue().Kind())
			}
			continue
		case fd.IsList():
			if ft.Kind() != reflect.Slice {
				t.Errorf("%s is a %s, envd's is repeated", where, ft)
				continue
			}
			ft = ft.Elem()
		}
		checkScalar(t, where, ft, fd)
	}
	for name, m := range members {
		t.Errorf("%s.%s (%s.%s) is not a member of envd's %s", path, name, gt, m.field.Name, md.FullName())
	}
}

// checkScalar checks the Go type of one value of the field fd, recursing into messages.
func checkScalar(t *testing.T, where string, ft reflect.Type, fd protoreflect.FieldDescriptor) {
	t.Helper()
	var want reflect.Type
	switch fd.Kind() {
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Timestamp" {
			want = reflect.TypeFor[string]()
			break
		}
		checkMembers(t, where, ft, fd.Message())
		return
	case protoreflect.EnumKind:
		// An enum is its name, read by name or number.
		if ft.Kind() != reflect.String || !reflect.PointerTo(ft).Implements(unmarshals) {
			t.Errorf("%s is a %s, want a string type that reads envd's %s by name or number", where, ft,
				fd.Enum().FullName())
		}
		return
	case protoreflect.StringKind:
		want = reflect.TypeFor[string]()
	case protoreflect.BoolKind:
		want = reflect.TypeFor[bool]()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		want = int32Type
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		want = uint32Type
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		want = int64Type
	case protoreflect.BytesKind:
		want = bytesType
	}
	if ft != want {
		t.Errorf("%s is a %v, want %v for envd's %s", where, ft, want, fd.Kind())
	}
}

// Each type encodes as envd does and reads what envd sends: every message of envd's, filled in every way a oneof
// allows, once with every field set and once with every field that has presence set to its zero value, is read
// (no member unknown) and written back as protojson wrote it; written with the fields' proto names, it reads the
// same.
func TestMessagesRoundTripEnvdsJSON(t *testing.T) {
	files := loadDescriptors(t)
	for _, m := range messages {
		for _, name := range m.protos {
			md := message(t, files, name)
			for variant := range 4 {
				for _, zero := range []bool{false, true} {
					msg := dynamicpb.NewMessage(md)
					fill(msg, variant, zero)
					want, err := protojson.Marshal(msg)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					got := roundTrip(t, name, reflect.TypeOf(m.value), want)
					if canonical(t, got) != canonical(t, want) {
						t.Errorf("%s does not come back as envd writes it:\n envd  %s\n again %s", name, want, got)
					}
					protoNames, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					got = roundTrip(t, name, reflect.TypeOf(m.value), protoNames)
					if canonical(t, got) != canonical(t, want) {
						t.Errorf("%s with proto names does not read as with JSON names:\n proto names %s\n again %s",
							name, protoNames, got)
					}
				}
			}
		}
	}
}

// roundTrip decodes data into a new value of gt, refusing unknown members, and encodes it again.
func roundTrip(t *testing.T, name string, gt reflect.Type, data []byte) []byte {
	t.Helper()
	v := reflect.New(gt)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		t.Errorf("%s does not read envd's %s: %v", gt, data, err)
		return nil
	}
	out, err := json.Marshal(v.Interface())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// canonical is data with its members sorted and its spacing removed, so that only the values count (protojson
// varies its spacing on purpose).
func canonical(t *testing.T, data []byte) string {
	t.Helper()
	if data == nil {
		return "<nothing>"
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// fill sets the fields of m: in each oneof only member variant (modulo its size); with zero, only the fields with
// presence, each to its zero value (an empty message, "", 0, false), which protojson writes all the same.
func fill(m protoreflect.Message, variant int, zero bool) {
	md := m.Descriptor()
	if md.FullName() == "google.protobuf.Timestamp" {
		if !zero {
			m.Set(md.Fields().ByName("seconds"), protoreflect.ValueOfInt64(1700000000))
			m.Set(md.Fields().ByName("nanos"), protoreflect.ValueOfInt32(123456000))
		}
		return
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() &&
			od.Fields().Get(variant%od.Fields().Len()) != fd {
			continue
		}
		if zero && !fd.HasPresence() {
			continue
		}
		switch {
		case fd.IsMap():
			m.Mutable(fd).Map().Set(protoreflect.ValueOfString("K").MapKey(), protoreflect.ValueOfString("v=1"))
		case fd.IsList():
			list := m.Mutable(fd).List()
			for range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := list.NewElement()
					fill(e.Message(), variant, zero)
					list.Append(e)
				} else {
					list.Append(sample(fd))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), variant, zero)
		case zero:
			m.Set(fd, fd.Default())
		default:
			m.Set(fd, sample(fd))
		}
	}
}

// sample is a value of fd's kind far from its zero: a negative integer where it may be one, bytes whose base64
// has both of the alphabets' differing characters, an enum's last value.
func sample(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("v-" + string(fd.Name()) + " ü/\"")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(4294967295)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-1234567890123)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0xfb, 0xff, 0xfe, 'h', 'i'})
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return protoreflect.ValueOfEnum(values.Get(values.Len() - 1).Number())
	}
	panic("no sample of " + fd.Kind().String())
}
