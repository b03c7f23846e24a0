package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// CodeInterpreterPort is where the code-interpreter template's server (a Jupyter kernel behind a small HTTP
// service) answers in the sandbox.
const CodeInterpreterPort = 49999

// CodeInterpreterTemplate is E2B's template whose sandboxes run that server.
const CodeInterpreterTemplate = "code-interpreter-v1"

// maxExecuteLine is the default bound of one line of an execution's stream (a result carries its PNG or HTML whole,
// in one line); a caller that shows results within a limit gives a bound near it (WithMaxLine). A line over the
// bound is left out, not held, and counted in Execution.Dropped. The results held of one execution are bounded by
// heldLines lines' worth.
const (
	maxExecuteLine = 32 << 20
	heldLines      = 4
)

// CodeInterpreter talks to the code-interpreter server of one sandbox, addressed as E2B's code-interpreter SDK
// addresses it: https://49999-<id>.<domain>, or the configured sandbox URL with the routing headers. Make one with
// Envd.CodeInterpreter; it is cheap and safe for concurrent use.
//
// Port 49999 is the sandbox's like any other: code running in the sandbox can stop E2B's server and answer in its
// place, and it then receives the envd access token and the traffic token with every request, as E2B's server
// does. So every text that comes back (output, results, errors, tracebacks, contexts, error answers) has any
// piece of either token replaced (scrub), and what one execution makes the client hold is bounded.
type CodeInterpreter struct {
	envd    *Envd
	traffic string
	maxLine int
}

// CodeInterpreter returns a handle on the sandbox's code-interpreter server. trafficToken is the sandbox's
// traffic access token ("" for a sandbox with public traffic), which its ports then require.
func (e *Envd) CodeInterpreter(trafficToken string) *CodeInterpreter {
	return &CodeInterpreter{envd: e, traffic: trafficToken, maxLine: maxExecuteLine}
}

// WithMaxLine returns a copy of ci whose executions leave out every line of their stream over n bytes.
func (ci *CodeInterpreter) WithMaxLine(n int) *CodeInterpreter {
	c := *ci
	c.maxLine = n
	return &c
}

// scrub hides both tokens in s (see CodeInterpreter).
func (ci *CodeInterpreter) scrub(s string) string {
	return scrub(s, ci.envd.conn.AccessToken, ci.traffic)
}

// scrubJSON hides both tokens in every string (and name) of a JSON value.
func (ci *CodeInterpreter) scrubJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(strconv.Quote(ci.scrub(string(raw))))
	}
	out, err := json.Marshal(ci.scrubValue(v))
	if err != nil {
		return nil
	}
	return out
}

func (ci *CodeInterpreter) scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return ci.scrub(x)
	case []any:
		for i := range x {
			x[i] = ci.scrubValue(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[ci.scrub(k)] = ci.scrubValue(item)
		}
		return out
	}
	return v
}

// scrubResult hides both tokens in every text format of r; the images (PNG, JPEG, PDF) are data, not text.
func (ci *CodeInterpreter) scrubResult(r *CodeResult) {
	for _, s := range []*string{&r.Text, &r.HTML, &r.Markdown, &r.SVG, &r.LaTeX, &r.JavaScript} {
		*s = ci.scrub(*s)
	}
	for _, raw := range []*json.RawMessage{&r.JSON, &r.Data, &r.Chart} {
		*raw = ci.scrubJSON(*raw)
	}
	if r.Extra != nil {
		extra := make(map[string]json.RawMessage, len(r.Extra))
		for k, raw := range r.Extra {
			extra[ci.scrub(k)] = ci.scrubJSON(raw)
		}
		r.Extra = extra
	}
}

// Execution is one cell's run: what it printed came through ExecuteHandlers, this is the rest.
type Execution struct {
	Results []CodeResult
	// Error is the cell's exception, or an error of the server's own (ExecutionAborted, ContextRestarting, ...).
	Error          *ExecutionError
	ExecutionCount int
	// Dropped is how many lines of the stream were left out: over the line bound, or past what one execution
	// may hold (see WithMaxLine).
	Dropped int

	held int // bytes of the results kept
}

// CodeResult is one result of a cell: the value of its last line (IsMainResult) or something it displayed
// (a plt.show(), display()). Each format is present only when the kernel gave it.
type CodeResult struct {
	IsMainResult bool            `json:"is_main_result"`
	Text         string          `json:"text,omitempty"`
	HTML         string          `json:"html,omitempty"`
	Markdown     string          `json:"markdown,omitempty"`
	SVG          string          `json:"svg,omitempty"`
	PNG          string          `json:"png,omitempty"` // base64
	JPEG         string          `json:"jpeg,omitempty"`
	PDF          string          `json:"pdf,omitempty"`
	LaTeX        string          `json:"latex,omitempty"`
	JavaScript   string          `json:"javascript,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	// Data is a DataFrame as {column: [values]}; Chart what the server read of a matplotlib figure.
	Data  json.RawMessage            `json:"data,omitempty"`
	Chart json.RawMessage            `json:"chart,omitempty"`
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// ExecutionError is an exception raised by a cell: its class name, its message and the kernel's traceback.
type ExecutionError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// The server joins the kernel's traceback parts with nothing between them, where IPython prints them a line each:
// the rule of dashes and the "Traceback (most recent call last)" header run into what follows. These put the
// line breaks back where a part ended without one (the frames and the last line end with their own).
var (
	tracebackRule   = regexp.MustCompile(`(-{20,})([^-\n])`)
	tracebackHeader = regexp.MustCompile(`(Traceback \(most recent call last\))([^\n])`)
)

// tracebackLines gives a traceback as the server joined it its line breaks back.
func tracebackLines(tb string) string {
	tb = tracebackRule.ReplaceAllString(tb, "$1\n$2")
	return tracebackHeader.ReplaceAllString(tb, "$1\n$2")
}

// ExecuteHandlers receive an execution's output as it comes; either may be nil.
type ExecuteHandlers struct {
	OnStdout, OnStderr func(text string)
}

// ExecuteRequest is one cell to run: in the context ContextID, else the default context of Language (python
// when both are empty). EnvVars are set for this execution only.
type ExecuteRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id,omitempty"`
	Language  string            `json:"language,omitempty"`
	EnvVars   map[string]string `json:"env_vars,omitempty"`
}

// CodeContext is a kernel of the server: its own state and execution count.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// Execute runs a cell and returns when the server says it ended. When ctx ends first the request is dropped,
// and the server, seeing its client gone, interrupts the kernel: the context survives, its state too.
func (ci *CodeInterpreter) Execute(ctx context.Context, in ExecuteRequest, h ExecuteHandlers) (*Execution, error) {
	const op = "code interpreter execute"
	if in.ContextID != "" && in.Language != "" {
		return nil, errorf(op, ErrInvalidArgument, "only one of context_id and language can be given")
	}
	resp, err := ci.call(ctx, op, http.MethodPost, "/execute", in, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ex := &Execution{}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := readLine(r, ci.maxLine)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, contextError(op, ctx.Err())
			case errors.Is(err, errLineTooLong):
				ex.Dropped++
				continue
			case errors.Is(err, io.EOF):
				return nil, ci.envd.client.noAnswer(op, ErrStreamCut, errors.New("the execution's stream ended before "+
					"its end_of_execution"))
			default:
				return nil, ci.envd.client.transportError(ctx, op, err)
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		done, err := ci.take(ex, line, h)
		if err != nil {
			return nil, errorf(op, ErrBadAnswer, "unexpected answer from the code interpreter: %w", err)
		}
		if done {
			return ex, nil
		}
	}
}

// take adds one line of the stream to ex, every text in it scrubbed; done is the end of the execution.
func (ci *CodeInterpreter) take(ex *Execution, line []byte, h ExecuteHandlers) (done bool, err error) {
	var head struct {
		Type           string `json:"type"`
		Text           string `json:"text"`
		ExecutionCount int    `json:"execution_count"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return false, err
	}
	switch head.Type {
	case "stdout":
		if h.OnStdout != nil {
			h.OnStdout(ci.scrub(head.Text))
		}
	case "stderr":
		if h.OnStderr != nil {
			h.OnStderr(ci.scrub(head.Text))
		}
	case "number_of_executions":
		ex.ExecutionCount = head.ExecutionCount
	case "result":
		if ex.held+len(line) > heldLines*ci.maxLine {
			ex.Dropped++
			return false, nil
		}
		var res CodeResult
		if err := json.Unmarshal(line, &res); err != nil {
			return false, err
		}
		ci.scrubResult(&res)
		ex.held += len(line)
		ex.Results = append(ex.Results, res)
	case "error":
		var e ExecutionError
		if err := json.Unmarshal(line, &e); err != nil {
			return false, err
		}
		e.Name, e.Value, e.Traceback = ci.scrub(e.Name), ci.scrub(e.Value), ci.scrub(tracebackLines(e.Traceback))
		ex.Error = &e
	case "end_of_execution":
		return true, nil
	}
	// keepalive, and kinds a newer server may add, carry nothing to keep.
	return false, nil
}

var errLineTooLong = errors.New("a line over the bound")

// readLine reads one line of at most limit bytes (without its newline); the last line may end without one. A
// longer line is read to its end without being kept, and is errLineTooLong.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// CreateContext starts a new context (its own kernel) for language ("" is python) with the working directory
// cwd ("" is /home/user).
func (ci *CodeInterpreter) CreateContext(ctx context.Context, language, cwd string) (CodeContext, error) {
	in := struct {
		Language string `json:"language,omitempty"`
		Cwd      string `json:"cwd,omitempty"`
	}{language, cwd}
	var out CodeContext
	err := ci.unary(ctx, "code interpreter create context", http.MethodPost, "/contexts", in, &out, false)
	return ci.scrubContext(out), err
}

// scrubContext hides both tokens in what a context says of itself.
func (ci *CodeInterpreter) scrubContext(c CodeContext) CodeContext {
	return CodeContext{ID: ci.scrub(c.ID), Language: ci.scrub(c.Language), Cwd: ci.scrub(c.Cwd)}
}

// ListContexts lists the contexts, the default ones included.
func (ci *CodeInterpreter) ListContexts(ctx context.Context) ([]CodeContext, error) {
	var out []CodeContext
	err := ci.unary(ctx, "code interpreter list contexts", http.MethodGet, "/contexts", nil, &out, true)
	for i := range out {
		out[i] = ci.scrubContext(out[i])
	}
	return out, err
}

// RestartContext restarts a context's kernel: its state and execution count are gone.
func (ci *CodeInterpreter) RestartContext(ctx context.Context, id string) error {
	return ci.unary(ctx, "code interpreter restart context", http.MethodPost, "/contexts/"+url.PathEscape(id)+"/restart",
		nil, nil, false)
}

// RemoveContext shuts a context's kernel down.
func (ci *CodeInterpreter) RemoveContext(ctx context.Context, id string) error {
	return ci.unary(ctx, "code interpreter remove context", http.MethodDelete, "/contexts/"+url.PathEscape(id), nil, nil,
		false)
}

// unary makes a call whose answer is one JSON value, decoded into out (when not nil), within the request timeout.
func (ci *CodeInterpreter) unary(ctx context.Context, op, method, path string, in, out any, retry bool) error {
	ctx, cancel := context.WithTimeout(ctx, ci.envd.client.cfg.RequestTimeout)
	defer cancel()
	resp, err := ci.call(ctx, op, method, path, in, retry)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, connectMaxMessage+1))
	if err != nil {
		return ci.envd.client.transportError(ctx, op, err)
	}
	if len(data) > connectMaxMessage {
		return errorf(op, ErrBadAnswer, "answer exceeds %d bytes", connectMaxMessage)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errorf(op, ErrBadAnswer, "unexpected answer from the code interpreter: %w", err)
	}
	return nil
}

// call sends a request to the server, with in (when not nil) as its JSON body, and returns a 200 answer; any
// other answer becomes an *APIError, whose message is the server's text (it answers errors as text/plain).
func (ci *CodeInterpreter) call(ctx context.Context, op, method, path string, in any,
	retry bool) (*http.Response, error) {
	base, headers := ci.envd.PortTarget(CodeInterpreterPort)
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, errorf(op, ErrInvalidArgument, "encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base.String(), "/")+path, body)
	if err != nil {
		return nil, errorf(op, ErrInvalidArgument, "%w", err)
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	if body != nil {
		req.ContentLength = -1 // chunked, as envd's bodies go (see Envd.newRequest)
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", ci.envd.client.cfg.UserAgent)
	// The server passes the envd token on to envd (for the sandbox's env vars); the edge wants the traffic token.
	if t := ci.envd.conn.AccessToken; t != "" {
		req.Header.Set("X-Access-Token", t)
	}
	if ci.traffic != "" {
		req.Header.Set(TrafficTokenHeader, ci.traffic)
	}
	resp, err := ci.envd.send(op, req, retry)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		apiErr := ci.envd.responseError(op, resp)
		apiErr.Message = ci.scrub(apiErr.Message)
		return nil, apiErr
	}
	return resp, nil
}
