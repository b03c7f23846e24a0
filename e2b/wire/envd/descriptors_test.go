package envd_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// envd's process.proto and filesystem.proto, as compiled into the real envd 0.6.13 (the descriptors protoc-gen-go
// embeds in the binary), so that the messages are checked against what envd speaks even where the binary is not.
// TestDescriptorsAreThoseOfEnvd keeps the file equal to the binary's.
const descriptorsFile = "testdata/envd-0.6.13.txtpb"

// envdProtos are the files of envd's services the package mirrors.
var envdProtos = []string{"process/process.proto", "filesystem/filesystem.proto"}

var update = flag.Bool("update", false, "rewrite "+descriptorsFile+" from the real envd's binary")

// readDescriptors reads descriptorsFile as it is.
func readDescriptors(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	data, err := os.ReadFile(descriptorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := prototext.Unmarshal(data, &set); err != nil {
		t.Fatalf("%s: %v", descriptorsFile, err)
	}
	return &set
}

// loadDescriptors reads descriptorsFile: envd's files, resolved against protobuf's well-known types.
func loadDescriptors(t *testing.T) *protoregistry.Files {
	t.Helper()
	set := readDescriptors(t)
	files := new(protoregistry.Files)
	if err := files.RegisterFile(timestamppb.File_google_protobuf_timestamp_proto); err != nil {
		t.Fatal(err)
	}
	for _, fdp := range set.File {
		fd, err := protodesc.NewFile(fdp, files)
		if err != nil {
			t.Fatalf("%s: %s: %v", descriptorsFile, fdp.GetName(), err)
		}
		if err := files.RegisterFile(fd); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// message finds a message of envd's by its full name (process.ProcessEvent.EndEvent).
func message(t *testing.T, files *protoregistry.Files, name string) protoreflect.MessageDescriptor {
	t.Helper()
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatalf("envd has no message %s: %v", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		t.Fatalf("envd's %s is not a message", name)
	}
	return md
}

// The descriptors the tests check against are those compiled into the real envd.
func TestDescriptorsAreThoseOfEnvd(t *testing.T) {
	dir, err := e2btest.FindRealEnvd()
	if err != nil {
		optional.Skip(t, err.Error())
	}
	binary := filepath.Join(dir, "envd")
	exe, err := os.ReadFile(binary)
	if os.IsNotExist(err) {
		optional.Skip(t, "the real envd is not at "+binary)
	}
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	for _, name := range envdProtos {
		fdp, err := embeddedDescriptor(exe, name)
		if err != nil {
			t.Fatalf("%s: %v", binary, err)
		}
		set.File = append(set.File, fdp)
	}
	if *update {
		text := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Format(&set)
		if err := os.WriteFile(descriptorsFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !proto.Equal(&set, readDescriptors(t)) {
		t.Errorf("%s is not what %s holds: rerun this test with -update, then read the difference", descriptorsFile,
			binary)
	}
}

// embeddedDescriptor finds the serialized FileDescriptorProto of the file name in a Go binary built with
// protoc-gen-go's code, which embeds it as a string: its first field is the name, and its fields come in
// ascending number order, which tells where it ends.
func embeddedDescriptor(exe []byte, name string) (*descriptorpb.FileDescriptorProto, error) {
	head := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
	start := bytes.Index(exe, head)
	if start < 0 {
		return nil, fmt.Errorf("no descriptor of %s", name)
	}
	b, last := exe[start:], protowire.Number(0)
	end := 0
	for end < len(b) {
		num, typ, n := protowire.ConsumeTag(b[end:])
		if n < 0 || num < last || num > 14 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[end+n:])
		if m < 0 {
			break
		}
		end, last = end+n+m, num
	}
	var fdp descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(b[:end], &fdp); err != nil {
		return nil, fmt.Errorf("the descriptor of %s: %v", name, err)
	}
	if fdp.GetName() != name || len(fdp.GetService()) != 1 {
		return nil, fmt.Errorf("the descriptor of %s is not whole: %s with %d services", name, fdp.GetName(),
			len(fdp.GetService()))
	}
	return &fdp, nil
}
