package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// standIn is a scripted model behind the APIs the assistants call: Anthropic's Messages (Claude Code), OpenAI's
// Responses and Chat Completions (Codex, Copilot CLI) and Gemini's generateContent (Gemini CLI). Whatever the
// API, it plays the scenario: it reads the tool results the client hands back (what the model would read), and
// answers with the next tool call, or with a closing text once the scenario is done. A request that offers none
// of e2b-mcp's tools (a title, a summary, a classifier a client asks its model for on the side) gets a short
// text.
type standIn struct {
	mu  sync.Mutex
	run *run // the session being played; nil between sessions
	raw io.Writer
}

func (s *standIn) start(r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run = r
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if s.raw != nil {
		fmt.Fprintf(s.raw, "%s %s %s\n", req.Method, req.URL.Path, truncate(string(body), 4000))
	}
	p := req.URL.Path
	// A body the stand-in cannot read is answered with an error the client shows: read as empty, it would be
	// answered as a request that offers no tool, and the session would end on "OK." with no word of why.
	var msg map[string]any
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &msg)
	}
	if err != nil {
		log.Printf("stand-in: %s %s: the body is not a JSON object: %v", req.Method, p, err)
		writeError(w, http.StatusBadRequest, "stand-in: the request body is not a JSON object: "+err.Error())
		return
	}
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 1000})
	case strings.HasSuffix(p, "/messages"):
		s.anthropic(w, msg, body)
	case strings.HasSuffix(p, "/responses"):
		s.openAIResponses(w, msg, body)
	case strings.HasSuffix(p, "/chat/completions"):
		s.openAIChat(w, msg, body)
	case strings.Contains(p, ":streamGenerateContent"), strings.Contains(p, ":generateContent"):
		s.gemini(w, req, msg, body)
	case strings.Contains(p, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": 1000})
	case strings.HasSuffix(p, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "standin", "object": "model"}}})
	default:
		log.Printf("stand-in: no answer for %s %s", req.Method, p)
		http.NotFound(w, req)
	}
}

// turn reads what the client handed back since the model's last call and decides the model's next move: a tool
// call (named as the client offers it) or, when done or when the request offers no e2b-mcp tool, text.
func (s *standIn) turn(offered []string, results []toolResult,
	body []byte) (name string, args map[string]any, id string, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.run
	if r == nil {
		return "", nil, "", "OK."
	}
	if !offersOurs(offered) {
		// Claude Code defers an MCP server's tools: the model loads them with ToolSearch first.
		deferred := deferredRE.FindAllString(string(body), -1)
		if !slices.Contains(offered, "ToolSearch") || len(deferred) == 0 {
			return "", nil, "", "OK."
		}
		slices.Sort(deferred)
		return "ToolSearch", map[string]any{"query": "select:" + strings.Join(slices.Compact(deferred), ","),
			"max_results": 50}, "search", ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The client resends the whole conversation: only the results of the model's calls not yet read are new.
	// A result without a call ID (Gemini's may lack one) is matched by its place among those without.
	unnamed := 0
	for _, res := range results {
		key := res.ID
		if key == "" {
			unnamed++
			key = fmt.Sprintf("#%d", unnamed)
		}
		if !r.made[key] && res.ID != "" || r.read[key] {
			continue
		}
		r.read[key] = true
		r.record(res)
	}
	tool, a := r.nextCall()
	if tool == "" {
		return "", nil, "", "All the checks are done."
	}
	name = clientName(offered, tool)
	if name == "" {
		r.results = append(r.results, stepResult{scenario[r.next].name, false, "the client offers no tool " + tool})
		r.next = len(scenario)
		return "", nil, "", "The client does not offer " + tool + "."
	}
	r.calls++
	id = fmt.Sprintf("call_%d", r.calls)
	r.made[id] = true
	return name, a, id, ""
}

// deferredRE finds the e2b-mcp tools Claude Code names as deferred (to be loaded with ToolSearch).
var deferredRE = regexp.MustCompile(`mcp__e2b__e2b_[a-z_]+`)

// offersOurs says whether a request offers e2b-mcp's tools.
func offersOurs(offered []string) bool { return clientName(offered, "e2b_exec") != "" }

// clientName is the name under which a client offers an e2b-mcp tool: Claude Code and Codex prefix the server's
// name (mcp__e2b__e2b_exec), Gemini CLI too, with single underscores (mcp_e2b_e2b_exec), Copilot CLI with a
// hyphen (e2b-e2b_exec).
func clientName(offered []string, tool string) string {
	for _, n := range offered {
		if n == tool || strings.HasSuffix(n, "_"+tool) || strings.HasSuffix(n, "."+tool) || strings.HasSuffix(n, "/"+tool) ||
			strings.HasSuffix(n, "-"+tool) {
			return n
		}
	}
	return ""
}

// --- Anthropic Messages ---

func (s *standIn) anthropic(w http.ResponseWriter, msg map[string]any, body []byte) {
	var offered []string
	for _, t := range list(msg["tools"]) {
		offered = append(offered, str(obj(t)["name"]))
	}
	var results []toolResult
	for _, m := range list(msg["messages"]) {
		for _, c := range list(obj(m)["content"]) {
			block := obj(c)
			if block["type"] != "tool_result" {
				continue
			}
			res := toolResult{ID: strings.TrimPrefix(str(block["tool_use_id"]), "toolu_")}
			switch content := block["content"].(type) {
			case string:
				res.Text = content
			case []any:
				for _, part := range content {
					p := obj(part)
					switch p["type"] {
					case "text":
						res.Text += str(p["text"])
					case "image":
						if isImage(str(obj(p["source"])["data"])) {
							res.Images++
						}
					}
				}
			}
			results = append(results, res)
		}
	}
	name, args, id, text := s.turn(offered, results, body)
	answerAnthropic(w, msg, name, args, id, text)
}

// answerAnthropic answers a Messages request as the model: a call of tool name with args under id, or text when
// name is "", streamed when the request asks for it.
func answerAnthropic(w http.ResponseWriter, msg map[string]any, name string, args map[string]any, id, text string) {
	content := []any{map[string]any{"type": "text", "text": text}}
	stop := "end_turn"
	if name != "" {
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": name, "input": args}}
		stop = "tool_use"
	}
	answer := map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "model": str(msg["model"]),
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 10}}
	if msg["stream"] != true {
		writeJSON(w, answer)
		return
	}
	sse := newSSE(w)
	start := map[string]any{}
	for k, v := range answer {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	sse.event("message_start", map[string]any{"type": "message_start", "message": start})
	block := obj(content[0])
	if name != "" {
		input, _ := json.Marshal(args)
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": name, "input": map[string]any{}}})
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": text}})
	}
	sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop,
		"stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// --- OpenAI Responses (Codex) ---

func (s *standIn) openAIResponses(w http.ResponseWriter, msg map[string]any, body []byte) {
	var offered []string
	for _, t := range list(msg["tools"]) {
		tool := obj(t)
		offered = append(offered, str(tool["name"]))
		// A namespace of tools (an MCP server's) lists its functions inside.
		for _, inner := range list(tool["tools"]) {
			offered = append(offered, str(tool["name"])+"__"+str(obj(inner)["name"]))
		}
	}
	var results []toolResult
	for _, it := range list(msg["input"]) {
		item := obj(it)
		if t := str(item["type"]); t != "function_call_output" && t != "custom_tool_call_output" &&
			t != "mcp_tool_call_output" {
			continue
		}
		res := openAIOutput(item["output"])
		res.ID = str(item["call_id"])
		results = append(results, res)
	}
	name, args, id, text := s.turn(offered, results, body)
	var item map[string]any
	if name != "" {
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": name, "arguments": string(a),
			"status": "completed"}
		if i := strings.LastIndex(name, "__"); i > 0 && isNamespace(msg, name[:i]) {
			item["namespace"], item["name"] = name[:i], name[i+2:]
		}
	} else {
		item = map[string]any{"type": "message", "id": "msg_standin", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	resp := map[string]any{"id": "resp_standin", "object": "response", "status": "completed", "model": str(msg["model"]),
		"output": []any{item}, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10, "total_tokens": 110,
			"input_tokens_details":  map[string]any{"cached_tokens": 0},
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
	if msg["stream"] != true {
		writeJSON(w, resp)
		return
	}
	sse := newSSE(w)
	created := map[string]any{}
	for k, v := range resp {
		created[k] = v
	}
	created["status"], created["output"] = "in_progress", []any{}
	sse.event("response.created", map[string]any{"type": "response.created", "response": created})
	sse.event("response.output_item.added", map[string]any{"type": "response.output_item.added",
		"output_index": 0, "item": item})
	sse.event("response.output_item.done", map[string]any{"type": "response.output_item.done",
		"output_index": 0, "item": item})
	sse.event("response.completed", map[string]any{"type": "response.completed", "response": resp})
}

func isNamespace(msg map[string]any, name string) bool {
	for _, t := range list(msg["tools"]) {
		if tool := obj(t); str(tool["name"]) == name && len(list(tool["tools"])) > 0 {
			return true
		}
	}
	return false
}

// openAIOutput reads a function call's output: a string, or content items (text and images).
func openAIOutput(v any) toolResult {
	var res toolResult
	switch out := v.(type) {
	case string:
		res.Text = out
	case []any:
		for _, part := range out {
			p := obj(part)
			switch str(p["type"]) {
			case "input_text", "output_text", "text":
				res.Text += str(p["text"])
			case "input_image", "image_url", "image":
				u := str(p["image_url"])
				if u == "" {
					u = str(obj(p["image_url"])["url"])
				}
				if isImage(u) {
					res.Images++
				}
			}
		}
	case map[string]any:
		return openAIOutput(out["content"])
	}
	return res
}

// --- OpenAI Chat Completions (Copilot CLI) ---

func (s *standIn) openAIChat(w http.ResponseWriter, msg map[string]any, body []byte) {
	var offered []string
	for _, t := range list(msg["tools"]) {
		offered = append(offered, str(obj(obj(t)["function"])["name"]))
	}
	var results []toolResult
	for _, m := range list(msg["messages"]) {
		mm := obj(m)
		if mm["role"] != "tool" {
			continue
		}
		res := openAIOutput(mm["content"])
		res.ID = str(mm["tool_call_id"])
		results = append(results, res)
	}
	name, args, id, text := s.turn(offered, results, body)
	message := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if name != "" {
		a, _ := json.Marshal(args)
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(a)}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
	if msg["stream"] != true {
		writeJSON(w, map[string]any{"id": "chatcmpl-standin", "object": "chat.completion", "model": str(msg["model"]),
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return
	}
	sse := newSSE(w)
	delta := map[string]any{"role": "assistant"}
	if name != "" {
		calls := list(message["tool_calls"])
		c := obj(calls[0])
		c["index"] = 0
		delta["tool_calls"] = []any{c}
	} else {
		delta["content"] = text
	}
	sse.data(map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": str(msg["model"]),
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
	sse.data(map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": str(msg["model"]),
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, "usage": usage})
	sse.raw("data: [DONE]\n\n")
}

// --- Gemini generateContent (Gemini CLI) ---

func (s *standIn) gemini(w http.ResponseWriter, req *http.Request, msg map[string]any, body []byte) {
	var offered []string
	for _, t := range list(msg["tools"]) {
		for _, d := range list(obj(t)["functionDeclarations"]) {
			offered = append(offered, str(obj(d)["name"]))
		}
	}
	var results []toolResult
	contents := list(msg["contents"])
	for i, c := range contents {
		for _, part := range list(obj(c)["parts"]) {
			fr := obj(obj(part)["functionResponse"])
			if fr == nil {
				continue
			}
			// Gemini CLI hands the model the result as {"output": TEXT} ({"error": TEXT} for a tool error).
			response := obj(fr["response"])
			text := str(response["output"]) + str(response["error"])
			if text == "" {
				raw, _ := json.Marshal(response)
				text = string(raw)
			}
			res := toolResult{ID: str(fr["id"]), Text: text}
			for _, inner := range list(fr["parts"]) {
				if isImage(str(obj(obj(inner)["inlineData"])["data"])) {
					res.Images++
				}
			}
			// Images of a result may also come as inline data parts beside the response, or in the next turn.
			for _, sib := range list(obj(c)["parts"]) {
				if isImage(str(obj(obj(sib)["inlineData"])["data"])) {
					res.Images++
				}
			}
			if i+1 < len(contents) {
				for _, sib := range list(obj(contents[i+1])["parts"]) {
					if isImage(str(obj(obj(sib)["inlineData"])["data"])) {
						res.Images++
					}
				}
			}
			results = append(results, res)
		}
	}
	name, args, id, text := s.turn(offered, results, body)
	part := map[string]any{"text": text}
	if name != "" {
		part = map[string]any{"functionCall": map[string]any{"id": id, "name": name, "args": args}}
	}
	answer := map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model",
		"parts": []any{part}},
		"finishReason": "STOP", "index": 0}}, "usageMetadata": map[string]any{"promptTokenCount": 100,
		"candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion": "standin"}
	if !strings.Contains(req.URL.Path, ":streamGenerateContent") {
		writeJSON(w, answer)
		return
	}
	newSSE(w).data(answer)
}

// --- plumbing ---

type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f}
}

func (s *sseWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	s.raw("event: " + name + "\ndata: " + string(b) + "\n\n")
}

func (s *sseWriter) data(v any) {
	b, _ := json.Marshal(v)
	s.raw("data: " + string(b) + "\n\n")
}

func (s *sseWriter) raw(text string) {
	_, _ = io.WriteString(s.w, text)
	if s.f != nil {
		s.f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in Anthropic's error shape, {"type":"error","error":{"type":...,"message":...}}, whose
// error.message the OpenAI and Gemini clients read and show too.
func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error",
		"error": map[string]any{"type": "invalid_request_error", "message": message}})
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
