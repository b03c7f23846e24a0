package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/state"
)

type runCodeArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"A sandbox of the code-interpreter template (e2b_create_sandbox with template code-interpreter-v1)."`
	Code      string `json:"code" policy:"command" jsonschema:"minLength=1" jsonschema_description:"The code of one cell, run as in a Jupyter notebook: the value of its last line is the main result."`
	Language  string `json:"language,omitempty" jsonschema_description:"Run in the default context of this language (python by default); leave out when context_id is given."`
	ContextID string `json:"context_id,omitempty" jsonschema_description:"Run in this context (from e2b_code_context action create) instead of the language's default context."`
	TimeoutMs int    `json:"timeout_ms,omitempty" policy:"timeout_ms" jsonschema:"minimum=1,maximum=3600000" jsonschema_description:"Milliseconds before the execution is interrupted; the context and its state remain."`
}

type runCodeResult struct {
	SandboxID      string `json:"sandbox_id"`
	ContextID      string `json:"context_id,omitempty"`
	ExecutionCount int    `json:"execution_count,omitempty" jsonschema_description:"The kernel's count of executions in this context, as Jupyter numbers cells."`
	Success        bool   `json:"success" jsonschema_description:"False when the code raised an exception or was interrupted."`
	// Error is the exception the code raised.
	Error        *e2b.ExecutionError `json:"error,omitempty" jsonschema_description:"The exception the code raised: its name, value and traceback."`
	TimedOut     bool                `json:"timed_out,omitempty" jsonschema_description:"True when timeout_ms interrupted the execution."`
	Results      []codeResult        `json:"results" jsonschema_description:"What the cell displayed and its value (is_main_result), in order; images follow as image content."`
	Stdout       string              `json:"stdout"`
	Stderr       string              `json:"stderr"`
	Truncated    bool                `json:"truncated" jsonschema_description:"True when some text was cut to fit the result limit (around a marker line)."`
	Resumed      bool                `json:"resumed,omitempty" jsonschema_description:"True when E2B had paused the sandbox at its timeout and this call resumed it first."`
	CheckpointID string              `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken automatically after this step, by the checkpoint policy."`
	Warning      string              `json:"warning,omitempty"`
	attachments                      // its log, its files, an image
}

// codeResult is one result as the model reads it: the formats it can use, the others only named.
type codeResult struct {
	IsMainResult bool     `json:"is_main_result"`
	Formats      []string `json:"formats" jsonschema_description:"Every format the kernel gave this result (text, html, png, data, chart, ...)."`
	Text         string   `json:"text,omitempty"`
	Markdown     string   `json:"markdown,omitempty"`
	// HTMLText is the HTML as text (a table's rows one a line, cells separated by " | "), when the plain text is
	// only an object's name.
	HTMLText string          `json:"html_text,omitempty" jsonschema_description:"The HTML result as readable text (tables as rows of cells separated by ' | '), when there is no better plain text."`
	LaTeX    string          `json:"latex,omitempty"`
	JSON     string          `json:"json,omitempty"`
	SVG      string          `json:"svg,omitempty"`
	Image    *imagesafe.Info `json:"image,omitempty" jsonschema_description:"Set when the result is a PNG or JPEG image: it follows as image content, in the order of the results."`
	Note     string          `json:"note,omitempty"`
}

const runCodeName = "e2b_run_code"

// runCode is e2b_run_code: a cell run in a sandbox's code interpreter, whose state lives on between calls.
type runCode struct {
	*base
	settling *settling
}

func (t runCode) tool() Tool {
	return define(t.base, definition[runCodeArgs, runCodeResult]{
		name: runCodeName, images: true,
		description: fmt.Sprintf("Run Python code in a sandbox of the code-interpreter template (create it with "+
			"e2b_create_sandbox template %s) in a stateful Jupyter kernel: variables, imports and loaded data stay "+
			"for the next call in the same context. Answers with the cell's results: its last line's value (main "+
			"result), matplotlib charts as images, DataFrames as tables, the exception's name, value and traceback, "+
			"and what it printed. timeout_ms (default %d, max %d) interrupts the kernel, not the sandbox. Use "+
			"e2b_code_context for separate contexts. The result stays within the result limit (what your client shows whole).",
			e2b.CodeInterpreterTemplate, t.cfg.ExecForegroundLimit.Milliseconds(), maxExecTimeoutMs),
		// Code does whatever it does, as a command would.
		hints:    hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		defaults: runCodeArgs{TimeoutMs: int(t.cfg.ExecForegroundLimit.Milliseconds())},
		tasks:    TaskOfServer,
		run:      t.run,
	})
}

func (t runCode) run(ctx context.Context, call Caller, a *runCodeArgs) (*runCodeResult, error) {
	switch {
	case a.Language != "" && a.ContextID != "":
		return nil, userErrorf("Give language or context_id, not both: a context has its language. Nothing was run.")
	}
	timeout := time.Duration(a.TimeoutMs) * time.Millisecond
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	rec, err := t.countStep(call, use.rec.ID)
	if err != nil {
		return nil, err
	}
	stdout, stderr := newCapture(t.limit(ctx), ""), newCapture(t.limit(ctx), "")
	defer stdout.close()
	defer stderr.close()
	lang := a.Language
	if lang == "" {
		lang = "python"
	}
	dropKey := strings.Join([]string{call.Owner, rec.ID, a.ContextID, lang}, "\x00")
	if err := t.settling.wait(ctx, dropKey); err != nil {
		return nil, err
	}
	prog := startProgress(ctx, t.cfg.ProgressInterval, t.log)
	awake := t.keepAwake(ctx, use.c, call, rec)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	ex, err := withCodeInterpreter(runCtx, use.c, rec, func(ci *e2b.CodeInterpreter) (*e2b.Execution, error) {
		return ci.WithMaxLine(t.codeLineLimit(ctx)).Execute(runCtx, e2b.ExecuteRequest{Code: a.Code, ContextID: a.ContextID,
			Language: a.Language}, e2b.ExecuteHandlers{
			OnStdout: func(s string) { stdout.write([]byte(s)); prog.add([]byte(s)) },
			OnStderr: func(s string) { stderr.write([]byte(s)); prog.add([]byte(s)) },
		})
	})
	timedOut := err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
	if runCtx.Err() != nil {
		t.settling.dropped(dropKey)
	}
	cancel()
	prog.finish()
	awake()
	if err != nil && !timedOut {
		return nil, t.codeFailure(ctx, use.c, call, rec, a.ContextID, err)
	}
	res := runCodeResult{SandboxID: rec.ID, ContextID: a.ContextID, Resumed: use.resumed, Results: []codeResult{}}
	var images []mcp.Content
	if timedOut {
		res.TimedOut = true
		res.Warning = fmt.Sprintf("The execution was interrupted after %d ms (timeout_ms); the context and what it "+
			"had defined before remain. Raise timeout_ms, or run long work in parts.", timeout.Milliseconds())
	} else {
		res.ExecutionCount, res.Error = ex.ExecutionCount, ex.Error
		res.Results, images = t.results(ctx, call, ex.Results)
		if !clientOf(ctx).Images {
			t.unseenCharts(ctx, use.c, rec, res.Results, ex.Results)
		}
		if ex.Dropped > 0 {
			res.Warning = fmt.Sprintf("%d of the code interpreter's answers were over the %d bytes e2b_run_code takes of one "+
				"(a result, or output printed at once) and are left out. Print less at once, or save large output to a "+
				"file and read it with e2b_read_file.", ex.Dropped, t.codeLineLimit(ctx))
		}
	}
	res.Success = !timedOut && res.Error == nil
	var cutOut, cutErr bool
	res.Stdout, cutOut = stdout.text(t.limit(ctx))
	res.Stderr, cutErr = stderr.text(t.limit(ctx))
	res.Truncated = cutOut || cutErr
	// A cell changes the sandbox as a command does: the checkpoint policy counts it as a step.
	var warn string
	res.CheckpointID, warn = t.afterStep(ctx, use.c, call, rec, runCodeName)
	res.Warning = joinWarnings(use.warning, res.Warning, warn)
	res.attach(images...)
	t.fit(ctx, &res)
	return &res, nil
}

// interruptSettle is how long an execution waits after the last one in its context was dropped (timed out or
// cancelled). The server interrupts the kernel when it sees a request dropped; an execution that reaches the
// kernel before that interrupt has landed is aborted by it, and the server, which does not expect the kernel's
// "aborted" status, never answers that execution. A model's next call can come at once.
const interruptSettle = time.Second

// settling is when each context's last dropped execution has surely been interrupted, by owner, sandbox,
// context and language.
type settling struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func newSettling() *settling { return &settling{until: map[string]time.Time{}} }

// dropped notes that an execution of key was dropped now.
func (s *settling) dropped(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.until[key] = time.Now().Add(interruptSettle)
}

// wait returns once key's last dropped execution has settled, or with ctx's error.
func (s *settling) wait(ctx context.Context, key string) error {
	s.mu.Lock()
	d := time.Until(s.until[key])
	if d <= 0 {
		delete(s.until, key)
	}
	s.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// codeLineLimit bounds each line the code interpreter sends (see e2b.CodeInterpreter.WithMaxLine): port 49999 is
// the sandbox's, and what answers there may send anything. A line is one result or one piece of output: the
// result limit's worth of text, or a chart of up to twice the image limit in base64, which is scaled down to fit.
func (t runCode) codeLineLimit(ctx context.Context) int {
	return t.limit(ctx) + 2*t.cfg.ImageLimitBytes*4/3
}

// withCodeInterpreter calls f with the sandbox's code interpreter, and once more with its traffic token (from
// E2B's connect) when the sandbox's ports refuse a request without one: an edge refusal means nothing ran.
func withCodeInterpreter[T any](ctx context.Context, c *e2b.Client, rec state.SandboxRecord,
	f func(*e2b.CodeInterpreter) (T, error)) (T, error) {
	e := envd(c, rec)
	out, err := f(e.CodeInterpreter(""))
	var ae *e2b.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		return out, err
	}
	sb, _, cerr := c.ConnectSandbox(ctx, rec.ID, max(rec.TimeoutSeconds, 1))
	if cerr != nil || sb.TrafficAccessToken == nil || *sb.TrafficAccessToken == "" {
		return out, err
	}
	return f(e.CodeInterpreter(*sb.TrafficAccessToken))
}

// codeFailure words a failure of the code interpreter: a sandbox without one, an unknown context, or the
// sandbox's own state.
func (b *base) codeFailure(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	contextID string, err error) error {
	var ae *e2b.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == http.StatusBadGateway && strings.Contains(ae.Message, "port is not open"):
			return userErrorf("Sandbox '%s' (template %s) runs no code interpreter: nothing answers on port %d. "+
				"Create a sandbox with e2b_create_sandbox template %s for e2b_run_code, or use e2b_exec here.",
				rec.ID, rec.Template, e2b.CodeInterpreterPort, e2b.CodeInterpreterTemplate)
		case ae.Status == http.StatusNotFound && contextID != "":
			return userErrorf("Context '%s' not found in sandbox '%s': list its contexts with e2b_code_context action list.",
				echo(contextID), rec.ID)
		}
	}
	return b.sandboxFailure(ctx, c, call, rec, err)
}

// results turns the kernel's results into what the model reads, and PNG and JPEG results into image content
// fitted as e2b_read_file fits images; all images together stay within the image limit.
func (t runCode) results(ctx context.Context, call Caller, in []e2b.CodeResult) ([]codeResult, []mcp.Content) {
	out := make([]codeResult, 0, len(in))
	var images []mcp.Content
	left := t.cfg.ImageLimitBytes
	for _, r := range in {
		cr := codeResult{IsMainResult: r.IsMainResult, Formats: formatsOf(r), Text: r.Text,
			Markdown: r.Markdown, LaTeX: r.LaTeX}
		if r.HTML != "" && (r.Text == "" || objectRepr.MatchString(r.Text)) {
			cr.HTMLText = htmlText(r.HTML)
		}
		if len(r.JSON) > 0 && r.Text == "" {
			cr.JSON = string(r.JSON)
		}
		encoded, mime := r.PNG, imagesafe.PNG
		if encoded == "" {
			encoded, mime = r.JPEG, imagesafe.JPEG
		}
		if r.SVG != "" && encoded == "" {
			cr.SVG = r.SVG
		}
		if encoded != "" {
			img, info, note := t.image(ctx, call, encoded, mime, left)
			if img != nil {
				left -= info.Bytes
				cr.Image = &info
				images = append(images, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img), info.MIMEType))
			}
			cr.Note = note
		}
		out = append(out, cr)
	}
	return out, images
}

// image fits one base64 image result within room bytes, or says why it is not shown.
func (t runCode) image(ctx context.Context, call Caller, encoded, mime string,
	room int) ([]byte, imagesafe.Info, string) {
	data, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || imagesafe.MIME(data) != mime {
		return nil, imagesafe.Info{}, fmt.Sprintf("The %s result is not a valid %s image; it is not shown.",
			imagesafe.FormatName(mime), imagesafe.FormatName(mime))
	}
	if room < minImageRoom {
		return nil, imagesafe.Info{}, "This image is not shown: the images before it took the room images have in one " +
			"result. Show fewer charts per call."
	}
	lim := imagesafe.Limits{MaxBytes: room, MaxEdge: t.cfg.ImageMaxEdge, MaxPixels: imagesafe.DefaultMaxPixels,
		MaxDecodeBytes: imagesafe.DefaultMaxDecodeBytes}
	out, info, err := imagesafe.Fit(ctx, data, mime, lim, t.scaling, call.Owner)
	if err != nil {
		return nil, imagesafe.Info{}, "This image is not shown: " + err.Error()
	}
	if info.Scaled {
		return out, info, fmt.Sprintf("Shown scaled down from %d×%d to %d×%d to fit the limits.", info.SourceWidth,
			info.SourceHeight, info.Width, info.Height)
	}
	return out, info, ""
}

// unseenCharts saves each image result into the sandbox for a client that does not hand a tool's images to its
// model, and says in the result's note what the image was and how the user gets it: its file and a link. The
// image content still goes with the result, for a client that shows it to the user.
func (t runCode) unseenCharts(ctx context.Context, c *e2b.Client, rec state.SandboxRecord, out []codeResult,
	in []e2b.CodeResult) {
	for i, r := range in {
		encoded, ext := r.PNG, "png"
		if encoded == "" {
			encoded, ext = r.JPEG, "jpg"
		}
		data, err := base64.StdEncoding.DecodeString(encoded)
		if encoded == "" || err != nil {
			continue
		}
		what := describeChart(r.Chart, ext)
		p := fmt.Sprintf("%s/chart-%d-%d.%s", execOutputDir, rec.Steps, i+1, ext)
		if _, err := envd(c, rec).Upload(ctx, p, bytes.NewReader(data)); err != nil {
			out[i].Note = joinWarnings(out[i].Note, fmt.Sprintf("%s, sent as image content; but this client (%s) "+
				"does not hand a tool's images to its model, so you do not see it, and saving it to %s for the user "+
				"failed: %v. Save the figure to a file in the code (plt.savefig) and make a link with e2b_download_url.",
				what, clientOf(ctx).Profile, p, err))
			continue
		}
		out[i].Note = joinWarnings(out[i].Note, fmt.Sprintf("%s, %d bytes, sent as image content and saved to %s; but %s",
			what, len(data), p, t.unseenImage(ctx, c, rec, p)))
	}
}

// describeChart says what a chart image shows, from what E2B's code interpreter read of the figure (its type,
// title and axis labels) where it read anything.
func describeChart(chart json.RawMessage, ext string) string {
	var c struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		XLabel string `json:"x_label"`
		YLabel string `json:"y_label"`
	}
	what := "A chart (" + strings.ToUpper(ext) + " image)"
	if json.Unmarshal(chart, &c) != nil || c.Type == "" {
		return what
	}
	what = fmt.Sprintf("A %s chart", c.Type)
	if c.Title != "" {
		what += fmt.Sprintf(" titled %q", c.Title)
	}
	if c.XLabel != "" || c.YLabel != "" {
		what += fmt.Sprintf(" (x: %q, y: %q)", c.XLabel, c.YLabel)
	}
	return what + " (" + strings.ToUpper(ext) + " image)"
}

// minImageRoom is the least room worth fitting another image into.
const minImageRoom = 16 << 10

// formatsOf names the formats a result has, in the server's order.
func formatsOf(r e2b.CodeResult) []string {
	var fs []string
	for _, f := range []struct {
		name string
		has  bool
	}{
		{"text", r.Text != ""}, {"html", r.HTML != ""}, {"markdown", r.Markdown != ""}, {"svg", r.SVG != ""},
		{"png", r.PNG != ""}, {"jpeg", r.JPEG != ""}, {"pdf", r.PDF != ""}, {"latex", r.LaTeX != ""},
		{"json", len(r.JSON) > 0}, {"javascript", r.JavaScript != ""}, {"data", len(r.Data) > 0},
		{"chart", len(r.Chart) > 2},
	} {
		if f.has {
			fs = append(fs, f.name)
		}
	}
	for k := range r.Extra {
		fs = append(fs, k)
	}
	return fs
}

// objectRepr is IPython's plain text for an object that has no better one: <IPython.core.display.HTML object>.
var objectRepr = regexp.MustCompile(`^<[\w.]+ object( at 0x[0-9a-f]+)?>$`)

var (
	htmlDropped = regexp.MustCompile(`(?is)<(style|script)\b.*?</(style|script)\s*>`)
	htmlRowEnd  = regexp.MustCompile(`(?i)</tr\s*>|<br\s*/?>|</p\s*>|</div\s*>|</h[1-6]\s*>|</li\s*>`)
	htmlCellEnd = regexp.MustCompile(`(?i)</t[dh]\s*>`)
	htmlTag     = regexp.MustCompile(`(?s)<[^>]*>`)
	blankLines  = regexp.MustCompile(`\n[ \t|]*(\n[ \t|]*)+`)
)

// htmlText reads HTML as a model would like to: tags gone, table rows on lines of their own with their cells
// separated by " | ", entities decoded.
func htmlText(s string) string {
	s = htmlDropped.ReplaceAllString(s, "")
	s = strings.NewReplacer("\r", "", "\n", " ").Replace(s)
	s = htmlRowEnd.ReplaceAllString(s, "\n")
	s = htmlCellEnd.ReplaceAllString(s, " | ")
	s = htmlTag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(strings.Join(strings.Fields(l), " "), " |")
	}
	s = blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n")
	return strings.TrimSpace(s)
}

// fit brings the result within the result limit by cutting its longest text to its head and tail, again until
// it fits: output, a traceback, a long repr, whichever is the longest at each step.
func (t runCode) fit(ctx context.Context, res *runCodeResult) {
	size := func() int { return sizeOf(res) }
	for range 64 {
		over := size() - t.limit(ctx)
		if over <= 0 {
			return
		}
		field := longestText(res)
		if field == nil || len(*field) == 0 {
			return
		}
		// At most half of it at a time, so that what the limit leaves is shared among the long fields.
		s := []byte(*field)
		cost := fieldCost(s)
		room := max(max(cost-over, cost/2)-markerCost, 0)
		*field, _ = headAndTail(s, s, int64(len(s)), int64(strings.Count(*field, "\n")), room)
		res.Truncated = true
	}
}

// longestText is the longest text field of the result, which fit cuts first.
func longestText(res *runCodeResult) *string {
	fields := []*string{&res.Stdout, &res.Stderr}
	if res.Error != nil {
		fields = append(fields, &res.Error.Traceback, &res.Error.Value)
	}
	for i := range res.Results {
		r := &res.Results[i]
		fields = append(fields, &r.Text, &r.Markdown, &r.HTMLText, &r.LaTeX, &r.JSON, &r.SVG)
	}
	var longest *string
	for _, f := range fields {
		if longest == nil || len(*f) > len(*longest) {
			longest = f
		}
	}
	return longest
}
