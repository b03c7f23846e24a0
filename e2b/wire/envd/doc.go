// Package envd holds the messages of envd's Connect RPCs (process.Process and filesystem.Filesystem), and the
// answer of its POST /files, that both ends of this module speak: the e2b client sends the requests and reads the
// answers and stream events, the emulator (e2b/emulator) reads the requests and answers as envd does. Declared
// once, the two cannot drift apart.
//
// Each Connect type is a message of envd's process.proto or filesystem.proto in proto3 JSON, the codec envd
// (connect-go with protojson) and E2B's SDKs use, and encodes exactly as protojson does:
//   - members are the fields' lowerCamelCase JSON names;
//   - a field without presence (a plain scalar, a list, a map) is left out at its zero value (omitempty);
//   - a field with presence (optional, a member of a oneof, a message) is a pointer, sent whenever it is set,
//     even to its zero value (an empty chunk of output is "stdout":"", an end event's empty error "error":"");
//   - 64-bit integers are strings (Int64), bytes are standard base64 (Bytes), enums their names.
//
// Reading is as lenient as protojson's: integers as numbers or strings, bytes in either base64 alphabet, padded
// or not, enums by name or number, and the proto names of fields (exit_code) beside their JSON names. The
// package imports nothing of the module, so that the client, whose tests import the emulator, and the emulator
// can both import it.
package envd
