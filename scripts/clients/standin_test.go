package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The tests here drive the stand-in over real HTTP with request bodies shaped as each assistant sends them, and
// read its answers as each assistant's client would.

// e2bTools are the e2b-mcp tools the scenario calls, as the server names them.
var e2bTools = []string{"e2b_create_sandbox", "e2b_write_file", "e2b_exec", "e2b_read_file", "e2b_read_output",
	"e2b_manage_sandbox"}

// modelCall is the stand-in's answer as a client reads it: a tool call, or a closing text.
type modelCall struct {
	ID        string
	Namespace string // the Responses API's namespace of the tool, when the client offers one
	Name      string
	Args      map[string]any
	Text      string
}

// full is the tool's name as the client offered it.
func (c modelCall) full() string {
	if c.Namespace != "" {
		return c.Namespace + "__" + c.Name
	}
	return c.Name
}

// exchange is one call of the model and the result the client hands back for it.
type exchange struct {
	call   modelCall
	result string
	image  bool // the result carries pngBase64 as an image too
}

// modelAPI is one API the stand-in answers, as one assistant speaks it.
type modelAPI struct {
	name   string
	path   string
	stream bool
	// as is the name under which the client offers an e2b-mcp tool.
	as func(tool string) string
	// request is the body the client sends: the tools it offers, the prompt, then each call and its result.
	request func(stream bool, offered []string, history []exchange) map[string]any
	// read reads the answer as the client does, failing t on anything not in the API's wire shape.
	read func(t *testing.T, stream bool, resp *http.Response) modelCall
}

func modelAPIs() []modelAPI {
	prefixed := func(tool string) string { return "mcp__e2b__" + tool }
	var apis []modelAPI
	for _, stream := range []bool{false, true} {
		geminiPath := "/v1beta/models/gemini-2.5-pro:generateContent"
		if stream {
			geminiPath = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
		}
		apis = append(apis,
			modelAPI{name: "anthropic", path: "/v1/messages", stream: stream, as: prefixed,
				request: anthropicRequest, read: readAnthropic},
			modelAPI{name: "responses", path: "/v1/responses", stream: stream, as: prefixed,
				request: responsesRequest(false), read: readResponses},
			modelAPI{name: "responses namespace", path: "/v1/responses", stream: stream, as: prefixed,
				request: responsesRequest(true), read: readResponses},
			// Copilot CLI names an MCP server's tool SERVER-TOOL.
			modelAPI{name: "chat", path: "/v1/chat/completions", stream: stream,
				as: func(tool string) string { return "e2b-" + tool }, request: chatRequest, read: readChat},
			modelAPI{name: "gemini", path: geminiPath, stream: stream,
				as: func(tool string) string { return "mcp_e2b_" + tool }, request: geminiRequest, read: readGemini})
	}
	for i := range apis {
		if apis[i].stream {
			apis[i].name += " stream"
		}
	}
	return apis
}

// offers is what a client offers its model: a tool of its own, then e2b-mcp's.
func (api modelAPI) offers() []string {
	offered := []string{"Bash"}
	for _, tool := range e2bTools {
		offered = append(offered, api.as(tool))
	}
	return offered
}

// --- the requests, as each client sends them ---

func anthropicRequest(stream bool, offered []string, history []exchange) map[string]any {
	var tools []any
	for _, n := range offered {
		tools = append(tools, map[string]any{"name": n, "description": "a tool",
			"input_schema": map[string]any{"type": "object"}})
	}
	messages := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}}
	for _, x := range history {
		content := []any{map[string]any{"type": "text", "text": x.result}}
		if x.image {
			content = append(content, map[string]any{"type": "image", "source": map[string]any{"type": "base64",
				"media_type": "image/png", "data": pngBase64}})
		}
		messages = append(messages,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": x.call.ID,
				"name": x.call.Name, "input": x.call.Args}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result",
				"tool_use_id": x.call.ID, "content": content}}})
	}
	return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": stream, "tools": tools,
		"messages": messages}
}

// responsesRequest is Codex's body; namespaced, it lists e2b-mcp's tools inside a namespace of the server's.
func responsesRequest(namespaced bool) func(bool, []string, []exchange) map[string]any {
	return func(stream bool, offered []string, history []exchange) map[string]any {
		var tools, inner []any
		for _, n := range offered {
			if short, ok := strings.CutPrefix(n, "mcp__e2b__"); ok && namespaced {
				inner = append(inner, map[string]any{"type": "function", "name": short,
					"parameters": map[string]any{"type": "object"}})
				continue
			}
			tools = append(tools, map[string]any{"type": "function", "name": n,
				"parameters": map[string]any{"type": "object"}})
		}
		if namespaced {
			tools = append(tools, map[string]any{"type": "namespace", "name": "mcp__e2b", "tools": inner})
		}
		input := []any{map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": prompt}}}}
		for _, x := range history {
			args, _ := json.Marshal(x.call.Args)
			fc := map[string]any{"type": "function_call", "call_id": x.call.ID, "name": x.call.Name,
				"arguments": string(args)}
			if x.call.Namespace != "" {
				fc["namespace"] = x.call.Namespace
			}
			output := []any{map[string]any{"type": "input_text", "text": x.result}}
			if x.image {
				output = append(output, map[string]any{"type": "input_image",
					"image_url": "data:image/png;base64," + pngBase64})
			}
			input = append(input, fc, map[string]any{"type": "function_call_output", "call_id": x.call.ID,
				"output": output})
		}
		return map[string]any{"model": "standin", "stream": stream, "tools": tools, "input": input}
	}
}

func chatRequest(stream bool, offered []string, history []exchange) map[string]any {
	var tools []any
	for _, n := range offered {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n,
			"parameters": map[string]any{"type": "object"}}})
	}
	messages := []any{map[string]any{"role": "user", "content": prompt}}
	for _, x := range history {
		args, _ := json.Marshal(x.call.Args)
		content := []any{map[string]any{"type": "text", "text": x.result}}
		if x.image {
			content = append(content, map[string]any{"type": "image_url",
				"image_url": map[string]any{"url": "data:image/png;base64," + pngBase64}})
		}
		messages = append(messages,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": x.call.ID,
				"type": "function", "function": map[string]any{"name": x.call.Name, "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": x.call.ID, "content": content})
	}
	return map[string]any{"model": "gpt-5", "stream": stream, "tools": tools, "messages": messages}
}

func geminiRequest(_ bool, offered []string, history []exchange) map[string]any {
	var decls []any
	for _, n := range offered {
		decls = append(decls, map[string]any{"name": n, "parameters": map[string]any{"type": "object"}})
	}
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}
	for _, x := range history {
		fr := map[string]any{"id": x.call.ID, "name": x.call.Name, "response": map[string]any{"output": x.result}}
		if x.image {
			fr["parts"] = []any{map[string]any{"inlineData": map[string]any{"mimeType": "image/png",
				"data": pngBase64}}}
		}
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{
				"id": x.call.ID, "name": x.call.Name, "args": x.call.Args}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": fr}}})
	}
	return map[string]any{"contents": contents, "tools": []any{map[string]any{"functionDeclarations": decls}}}
}

// --- the answers, read as each client reads them ---

func readAnthropic(t *testing.T, stream bool, resp *http.Response) modelCall {
	t.Helper()
	if !stream {
		var m struct {
			Type       string           `json:"type"`
			Role       string           `json:"role"`
			StopReason string           `json:"stop_reason"`
			Content    []map[string]any `json:"content"`
		}
		decodeJSON(t, resp, &m)
		if m.Type != "message" || m.Role != "assistant" || len(m.Content) != 1 {
			t.Fatalf("not an assistant message with one block: %+v", m)
		}
		return anthropicBlock(t, m.Content[0], m.StopReason)
	}
	events := readSSE(t, resp)
	var names []string
	var block map[string]any
	var input, stop string
	for _, e := range events {
		names = append(names, e.name)
		if e.name != str(e.data["type"]) {
			t.Errorf("event %s carries type %v", e.name, e.data["type"])
		}
		switch e.name {
		case "content_block_start":
			block = obj(e.data["content_block"])
		case "content_block_delta":
			d := obj(e.data["delta"])
			input += str(d["partial_json"])
			if block != nil && block["type"] == "text" {
				block["text"] = str(block["text"]) + str(d["text"])
			}
		case "message_delta":
			stop = str(obj(e.data["delta"])["stop_reason"])
		}
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if block["type"] == "tool_use" {
		var args map[string]any
		if err := json.Unmarshal([]byte(input), &args); err != nil {
			t.Fatalf("the streamed input %q is not a JSON object: %v", input, err)
		}
		block["input"] = args
	}
	return anthropicBlock(t, block, stop)
}

func anthropicBlock(t *testing.T, block map[string]any, stop string) modelCall {
	t.Helper()
	switch block["type"] {
	case "tool_use":
		if stop != "tool_use" {
			t.Errorf("a tool_use block with stop_reason %q", stop)
		}
		return modelCall{ID: str(block["id"]), Name: str(block["name"]), Args: obj(block["input"])}
	case "text":
		if stop != "end_turn" {
			t.Errorf("a text block with stop_reason %q", stop)
		}
		return modelCall{Text: str(block["text"])}
	}
	t.Fatalf("a block neither tool_use nor text: %v", block)
	return modelCall{}
}

func readResponses(t *testing.T, stream bool, resp *http.Response) modelCall {
	t.Helper()
	var response map[string]any
	if !stream {
		decodeJSON(t, resp, &response)
	} else {
		events := readSSE(t, resp)
		var names []string
		for _, e := range events {
			names = append(names, e.name)
		}
		want := []string{"response.created", "response.output_item.added", "response.output_item.done",
			"response.completed"}
		if !reflect.DeepEqual(names, want) {
			t.Fatalf("events %v, want %v", names, want)
		}
		if !reflect.DeepEqual(events[1].data["item"], events[2].data["item"]) {
			t.Errorf("the item added %v is not the item done %v", events[1].data["item"], events[2].data["item"])
		}
		response = obj(events[3].data["response"])
	}
	output := list(response["output"])
	if response["object"] != "response" || response["status"] != "completed" || len(output) != 1 {
		t.Fatalf("not a completed response with one item: %v", response)
	}
	item := obj(output[0])
	switch item["type"] {
	case "function_call":
		var args map[string]any
		if err := json.Unmarshal([]byte(str(item["arguments"])), &args); err != nil {
			t.Fatalf("arguments %v are not a JSON object: %v", item["arguments"], err)
		}
		return modelCall{ID: str(item["call_id"]), Namespace: str(item["namespace"]), Name: str(item["name"]),
			Args: args}
	case "message":
		content := list(item["content"])
		if len(content) != 1 || obj(content[0])["type"] != "output_text" {
			t.Fatalf("a message not of one output_text: %v", item)
		}
		return modelCall{Text: str(obj(content[0])["text"])}
	}
	t.Fatalf("an item neither function_call nor message: %v", item)
	return modelCall{}
}

func readChat(t *testing.T, stream bool, resp *http.Response) modelCall {
	t.Helper()
	var message map[string]any
	var finish string
	if !stream {
		var m map[string]any
		decodeJSON(t, resp, &m)
		choices := list(m["choices"])
		if m["object"] != "chat.completion" || len(choices) != 1 {
			t.Fatalf("not a chat.completion of one choice: %v", m)
		}
		message, finish = obj(obj(choices[0])["message"]), str(obj(choices[0])["finish_reason"])
	} else {
		events := readSSE(t, resp)
		if len(events) < 2 || !events[len(events)-1].done {
			t.Fatalf("the stream does not end with [DONE]: %v", events)
		}
		// A client merges the chunks' deltas: text appended, a tool call's parts appended by index.
		message = map[string]any{}
		var content string
		calls := map[float64]map[string]any{}
		for _, e := range events[:len(events)-1] {
			choice := obj(list(e.data["choices"])[0])
			if e.data["object"] != "chat.completion.chunk" {
				t.Fatalf("not a chunk: %v", e.data)
			}
			if f := str(choice["finish_reason"]); f != "" {
				finish = f
			}
			d := obj(choice["delta"])
			content += str(d["content"])
			for _, c := range list(d["tool_calls"]) {
				idx, ok := obj(c)["index"].(float64)
				if !ok {
					t.Fatalf("a streamed tool call without an index: %v", c)
				}
				merged := calls[idx]
				if merged == nil {
					merged = map[string]any{"function": map[string]any{}}
					calls[idx] = merged
				}
				if id := str(obj(c)["id"]); id != "" {
					merged["id"] = id
				}
				f, mf := obj(obj(c)["function"]), obj(merged["function"])
				mf["name"] = str(mf["name"]) + str(f["name"])
				mf["arguments"] = str(mf["arguments"]) + str(f["arguments"])
			}
		}
		message["content"] = content
		if len(calls) > 0 {
			message["tool_calls"] = []any{calls[0]}
		}
	}
	if calls := list(message["tool_calls"]); len(calls) > 0 {
		if finish != "tool_calls" || len(calls) != 1 {
			t.Errorf("finish_reason %q with %d tool calls", finish, len(calls))
		}
		f := obj(obj(calls[0])["function"])
		var args map[string]any
		if err := json.Unmarshal([]byte(str(f["arguments"])), &args); err != nil {
			t.Fatalf("arguments %v are not a JSON object: %v", f["arguments"], err)
		}
		return modelCall{ID: str(obj(calls[0])["id"]), Name: str(f["name"]), Args: args}
	}
	if finish != "stop" {
		t.Errorf("a text answer with finish_reason %q", finish)
	}
	return modelCall{Text: str(message["content"])}
}

func readGemini(t *testing.T, stream bool, resp *http.Response) modelCall {
	t.Helper()
	var answers []map[string]any
	if !stream {
		var m map[string]any
		decodeJSON(t, resp, &m)
		answers = append(answers, m)
	} else {
		for _, e := range readSSE(t, resp) {
			if e.name != "" || e.done {
				t.Fatalf("Gemini's stream carries only data lines, not %+v", e)
			}
			answers = append(answers, e.data)
		}
	}
	var parts []any
	for _, a := range answers {
		candidates := list(a["candidates"])
		if len(candidates) != 1 {
			t.Fatalf("not one candidate: %v", a)
		}
		content := obj(obj(candidates[0])["content"])
		if content["role"] != "model" {
			t.Fatalf("a candidate not of the model: %v", a)
		}
		parts = append(parts, list(content["parts"])...)
	}
	if len(parts) != 1 {
		t.Fatalf("%d parts, want one: %v", len(parts), parts)
	}
	p := obj(parts[0])
	if fc := obj(p["functionCall"]); fc != nil {
		return modelCall{ID: str(fc["id"]), Name: str(fc["name"]), Args: obj(fc["args"])}
	}
	return modelCall{Text: str(p["text"])}
}

// --- plumbing ---

type sseEvent struct {
	name string
	data map[string]any
	done bool // data: [DONE]
}

// readSSE reads a whole event stream, failing t on a line that is not an event's name or JSON data.
func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("a stream answered as %q", ct)
	}
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case line == "data: [DONE]":
			events = append(events, sseEvent{done: true})
			cur = sseEvent{}
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("data that is not JSON: %q: %v", line, err)
			}
			events = append(events, cur)
			cur = sseEvent{}
		default:
			t.Fatalf("a line neither event nor data: %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return events
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("answered as %q, not JSON", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("the answer is not JSON: %v", err)
	}
}

// newRun is a session as main starts one, with what the client hands back written to the buffer returned.
func newRun() (*run, *bytes.Buffer) {
	var handed bytes.Buffer
	return &run{client: "test", made: map[string]bool{}, read: map[string]bool{}, handed: &handed}, &handed
}

// serve starts the stand-in playing r (none when r is nil) on 127.0.0.1:0.
func serve(t *testing.T, r *run) *httptest.Server {
	t.Helper()
	s := &standIn{raw: io.Discard}
	s.start(r)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// client's timeout bounds every exchange with the stand-in.
var client = &http.Client{Timeout: 30 * time.Second}

func postRaw(t *testing.T, srv *httptest.Server, path string, body []byte) *http.Response {
	t.Helper()
	resp, err := client.Post(srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// ask sends the client's request and reads the model's answer.
func (api modelAPI) ask(t *testing.T, srv *httptest.Server, offered []string, history []exchange) modelCall {
	t.Helper()
	body, err := json.Marshal(api.request(api.stream, offered, history))
	if err != nil {
		t.Fatal(err)
	}
	resp := postRaw(t, srv, api.path, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", api.path, resp.StatusCode, b)
	}
	return api.read(t, api.stream, resp)
}

// handedLines are the results the stand-in recorded, one JSON object each.
func handedLines(t *testing.T, r *run, handed *bytes.Buffer) []map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(handed.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a recorded line that is not JSON: %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func wantCall(t *testing.T, api modelAPI, got modelCall, tool string, args map[string]any) {
	t.Helper()
	if got.full() != api.as(tool) || got.ID == "" {
		t.Fatalf("answered %+v, want a call of %s with an ID", got, api.as(tool))
	}
	if api.name == "responses namespace" || api.name == "responses namespace stream" {
		if got.Namespace != "mcp__e2b" {
			t.Errorf("a call of a namespaced tool with namespace %q", got.Namespace)
		}
	}
	// Compare as JSON, as the client reads them.
	a, _ := json.Marshal(got.Args)
	b, _ := json.Marshal(args)
	if string(a) != string(b) {
		t.Errorf("the call of %s has arguments %s, want %s", tool, a, b)
	}
}

// TestStandInPlaysTheScenario drives each API the stand-in answers through the scenario's first steps, with the
// whole conversation resent each time as the clients do: it must call each step's tool under the client's name
// for it, read each result once (text and image) into results.jsonl, and feed one step's result into the next.
func TestStandInPlaysTheScenario(t *testing.T) {
	for _, api := range modelAPIs() {
		t.Run(api.name, func(t *testing.T) {
			r, handed := newRun()
			srv := serve(t, r)
			offered := api.offers()

			create := api.ask(t, srv, offered, nil)
			wantCall(t, api, create, "e2b_create_sandbox", map[string]any{"title": "clients check"})
			if n := len(handedLines(t, r, handed)); n != 0 {
				t.Fatalf("%d results recorded before any came back", n)
			}

			created := `{"sandbox_id": "sbx-test-42", "template": "base"}`
			history := []exchange{{call: create, result: created, image: true}}
			write := api.ask(t, srv, offered, history)
			wantCall(t, api, write, "e2b_write_file", map[string]any{"content": "hello from the model\n",
				"path": "/home/user/hello.txt", "sandbox_id": "sbx-test-42"})
			if write.ID == create.ID {
				t.Errorf("two calls with the one ID %q", write.ID)
			}

			history = append(history, exchange{call: write, result: `{"success": true}`})
			exec := api.ask(t, srv, offered, history)
			wantCall(t, api, exec, "e2b_exec", map[string]any{"command": "cat /home/user/hello.txt",
				"sandbox_id": "sbx-test-42"})

			want := []map[string]any{
				{"step": "create", "tool": "e2b_create_sandbox", "images": float64(1), "text": created},
				{"step": "write", "tool": "e2b_write_file", "images": float64(0), "text": `{"success": true}`},
			}
			if got := handedLines(t, r, handed); !reflect.DeepEqual(got, want) {
				t.Errorf("recorded %v, want %v", got, want)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			wantResults := []stepResult{{"create", true, "ok"}, {"write", true, "ok"}}
			if !reflect.DeepEqual(r.results, wantResults) || r.next != 2 {
				t.Errorf("results %+v at step %d, want %+v at step 2", r.results, r.next, wantResults)
			}
		})
	}
}

// TestStandInAnswersTextOffTheScenario: a request that offers none of e2b-mcp's tools (a title a client asks for
// on the side), or one that comes between sessions, gets a short text and moves no session on.
func TestStandInAnswersTextOffTheScenario(t *testing.T) {
	for _, api := range modelAPIs() {
		t.Run(api.name, func(t *testing.T) {
			r, handed := newRun()
			srv := serve(t, r)
			if got := api.ask(t, srv, []string{"Bash"}, nil); got.Text != "OK." || got.Name != "" {
				t.Errorf("a request offering no e2b tool got %+v, want the text OK.", got)
			}
			r.mu.Lock()
			calls, next := r.calls, r.next
			r.mu.Unlock()
			if calls != 0 || next != 0 || handed.Len() != 0 {
				t.Errorf("a side request moved the session: %d calls, step %d, recorded %q", calls, next, handed)
			}
			between := serve(t, nil)
			if got := api.ask(t, between, api.offers(), nil); got.Text != "OK." || got.Name != "" {
				t.Errorf("a request between sessions got %+v, want the text OK.", got)
			}
		})
	}
}

// TestStandInEndsWithText: once the scenario is done the model closes with text, not another call.
func TestStandInEndsWithText(t *testing.T) {
	for _, api := range modelAPIs() {
		t.Run(api.name, func(t *testing.T) {
			r, _ := newRun()
			r.next = len(scenario)
			srv := serve(t, r)
			if got := api.ask(t, srv, api.offers(), nil); got.Text != "All the checks are done." || got.Name != "" {
				t.Errorf("after the last step the model answered %+v", got)
			}
		})
	}
}

// TestStandInRejectsMalformedBodies: a body that is not a JSON object gets a 400 naming the problem, not a text
// answer as if no tool were offered, and the session stays where it was.
func TestStandInRejectsMalformedBodies(t *testing.T) {
	for _, api := range modelAPIs() {
		t.Run(api.name, func(t *testing.T) {
			r, handed := newRun()
			srv := serve(t, r)
			for _, body := range []string{`{"tools": [`, `[1, 2]`, `not json`} {
				resp := postRaw(t, srv, api.path, []byte(body))
				var e struct {
					Error struct{ Message string }
				}
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("the body %q got %d, want 400", body, resp.StatusCode)
				}
				decodeJSON(t, resp, &e)
				if !strings.Contains(e.Error.Message, "not a JSON object") {
					t.Errorf("the body %q got the error %q", body, e.Error.Message)
				}
			}
			if handed.Len() != 0 {
				t.Errorf("malformed bodies recorded %q", handed)
			}
			wantCall(t, api, api.ask(t, srv, api.offers(), nil), "e2b_create_sandbox",
				map[string]any{"title": "clients check"})
		})
	}
}

// TestStandInLoadsDeferredTools: Claude Code offers an MCP server's tools deferred, naming them in the prompt and
// offering ToolSearch; the model must load them with ToolSearch before it can call them.
func TestStandInLoadsDeferredTools(t *testing.T) {
	r, _ := newRun()
	srv := serve(t, r)
	body := anthropicRequest(false, []string{"Bash", "ToolSearch"}, nil)
	body["system"] = "Deferred tools: mcp__e2b__e2b_exec, mcp__e2b__e2b_create_sandbox, mcp__e2b__e2b_exec"
	raw, _ := json.Marshal(body)
	got := readAnthropic(t, false, postRaw(t, srv, "/v1/messages", raw))
	want := modelCall{ID: "toolu_search", Name: "ToolSearch", Args: map[string]any{
		"query": "select:mcp__e2b__e2b_create_sandbox,mcp__e2b__e2b_exec", "max_results": float64(50)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answered %+v, want %+v", got, want)
	}
	// ToolSearch's result is the client's, not a step's: it is not read as the create step's result.
	history := []exchange{{call: got, result: "loaded"}}
	next := readAnthropic(t, false, postRaw(t, srv, "/v1/messages",
		mustJSON(t, anthropicRequest(false, append([]string{"ToolSearch"}, modelAPIs()[0].offers()...), history))))
	wantCall(t, modelAPIs()[0], next, "e2b_create_sandbox", map[string]any{"title": "clients check"})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) != 0 || len(r.log) != 0 {
		t.Errorf("ToolSearch's result was read as a step's: %v %v", r.results, r.log)
	}
}

// TestStandInReportsAToolNotOffered: a client that offers e2b-mcp but not the tool a step needs ends the session
// with that step failed, naming the tool.
func TestStandInReportsAToolNotOffered(t *testing.T) {
	api := modelAPIs()[0]
	r, _ := newRun()
	srv := serve(t, r)
	got := api.ask(t, srv, []string{api.as("e2b_exec")}, nil)
	if got.Name != "" || !strings.Contains(got.Text, "e2b_create_sandbox") {
		t.Errorf("answered %+v, want a text naming e2b_create_sandbox", got)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := []stepResult{{"create", false, "the client offers no tool e2b_create_sandbox"}}
	if !reflect.DeepEqual(r.results, want) || r.next != len(scenario) {
		t.Errorf("results %+v at step %d, want %+v at the end", r.results, r.next, want)
	}
}

// TestStandInAnswersTheSideEndpoints: the token counts and model list the clients ask for along the way.
func TestStandInAnswersTheSideEndpoints(t *testing.T) {
	srv := serve(t, nil)
	for path, key := range map[string]string{"/v1/messages/count_tokens": "input_tokens",
		"/v1beta/models/gemini-2.5-pro:countTokens": "totalTokens"} {
		var m map[string]any
		decodeJSON(t, postRaw(t, srv, path, []byte(`{}`)), &m)
		if m[key] != float64(1000) {
			t.Errorf("%s answered %v", path, m)
		}
	}
	resp, err := client.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models map[string]any
	decodeJSON(t, resp, &models)
	if len(list(models["data"])) != 1 {
		t.Errorf("/v1/models answered %v", models)
	}
	if resp := postRaw(t, srv, "/v1/unknown", []byte(`{}`)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown path got %d, want 404", resp.StatusCode)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
