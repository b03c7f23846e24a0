package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
)

// A tool result as a client hands it to its model: the text the model reads and the images it sees.
type toolResult struct {
	ID     string `json:"id"` // the call's ID as the client sent it back ("" where it sends none)
	Text   string `json:"text"`
	Images int    `json:"images"`
}

// step is one call the stand-in model makes, and what its result must show for the step to pass.
type step struct {
	name string
	tool string
	args func(r *run) map[string]any
	// check says what is wrong with the result ("" passes); it may note what later steps need in r.
	check func(r *run, res toolResult) string
	// again, when set, makes the model repeat the step (a poll) while it answers true, at most maxRepeats times.
	again func(r *run, res toolResult) bool
}

const maxRepeats = 12

// pngBase64 is a 96×64 PNG, a red to orange gradient, that the model must see as an image.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAGAAAABACAIAAABqVuVZAAAAo0lEQVR4nOzQQRGDUADFwNfpF4N/FcjCAEMM7B4iIO" +
	"fete236WvP" +
	"/uODQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoG" +
	"BYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDApPAAAA//+PNwLdwWFWKAAAAABJRU5ErkJggg=="

var (
	sandboxIDRE = regexp.MustCompile(`"sandbox_id":\s*"([^"]+)"`)
	pidRE       = regexp.MustCompile(`"pid":\s*(\d+)`)
	approvalRE  = regexp.MustCompile(`http://127\.0\.0\.1:\d+/approve/[0-9a-z]+\.[A-Za-z0-9_-]+`)
	spilledRE   = regexp.MustCompile(`(?i)(saved|written|persisted) to .*file|tool-results/|output too large`)
)

// scenario is what every client is put through, in order: the calls a user's assistant makes in a session.
var scenario = []step{
	{name: "create", tool: "e2b_create_sandbox",
		args: func(*run) map[string]any { return map[string]any{"title": "clients check"} },
		check: func(r *run, res toolResult) string {
			m := sandboxIDRE.FindStringSubmatch(res.Text)
			if m == nil {
				return "no sandbox_id: " + head(res.Text)
			}
			r.sandbox = m[1]
			return ""
		}},
	{name: "write", tool: "e2b_write_file",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "path": "/home/user/hello.txt", "content": "hello from the model\n"}
		},
		check: wants(`"success":\s*true`)},
	{name: "exec", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "cat /home/user/hello.txt"}
		},
		check: wants("hello from the model", `"exit_code":\s*0`)},
	{name: "failing exec", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "ls /no/such/dir"}
		},
		check: wants(`"exit_code":\s*2`, "No such file")},
	{name: "timeout_ms kill", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "sleep 60", "timeout_ms": 1500}
		},
		check: wants(`(?i)timed out|timeout|killed`)},
	{name: "seq 1 200000", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "seq 1 200000"}
		},
		check: func(r *run, res toolResult) string {
			// The output's last line, in the JSON text as `\n200000\n`: no \b before it, the n of \n being a letter.
			if msg := wants(`"exit_code":\s*0`, `(^|\D)200000(\D|$)`, `"truncated":\s*true`)(r, res); msg != "" {
				return msg
			}
			if spilledRE.MatchString(res.Text) {
				return "the client put the result in a file: " + head(res.Text)
			}
			return fmt.Sprintf("ok (%d chars)", len(res.Text))
		}},
	{name: "make a PNG", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "echo " + pngBase64 + " | base64 -d > " +
				"/home/user/red.png && echo made"}
		},
		check: wants("made")},
	{name: "PNG read", tool: "e2b_read_file",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "path": "/home/user/red.png"}
		},
		check: func(_ *run, res toolResult) string {
			switch {
			case res.Images > 0:
				return "ok: image seen"
			case strings.Contains(res.Text, "shown as image content"):
				return "no image, yet the note says \"shown as image content\""
			case regexp.MustCompile(`https?://\S+`).MatchString(res.Text):
				return "ok: no image; a note and a link"
			}
			return "no image and no link: " + head(res.Text)
		}},
	{name: "long job", tool: "e2b_exec",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "command": "for i in 1 2 3 4 5 6; do echo tick $i; sleep " +
				"1; done; echo finished"}
		},
		check: func(r *run, res toolResult) string {
			m := pidRE.FindStringSubmatch(res.Text)
			if m == nil || !regexp.MustCompile(`"running":\s*true`).MatchString(res.Text) {
				if strings.Contains(res.Text, "finished") {
					return "ok: ended within the call"
				}
				return "neither running nor ended: " + head(res.Text)
			}
			r.pid = m[1]
			return "ok: moved to the background"
		}},
	{name: "follow the job", tool: "e2b_read_output",
		args: func(r *run) map[string]any {
			if r.pid == "" {
				return nil // the job ended within the call: nothing to follow
			}
			return map[string]any{"sandbox_id": r.sandbox, "pid": json.Number(r.pid), "wait_ms": 5000}
		},
		again: func(_ *run, res toolResult) bool {
			return regexp.MustCompile(`"running":\s*true`).MatchString(res.Text)
		},
		check: wants("finished", `"exit_code":\s*0`)},
	{name: "delete (approval)", tool: "e2b_manage_sandbox",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "action": "delete"}
		},
		check: func(r *run, res toolResult) string {
			link := approvalRE.FindString(res.Text)
			if link == "" {
				return "no approval link: " + head(res.Text)
			}
			if err := approveOnPage(link); err != nil {
				return "approving on the page: " + err.Error()
			}
			return "ok: link given, approved on the page"
		}},
	{name: "delete again", tool: "e2b_manage_sandbox",
		args: func(r *run) map[string]any {
			return map[string]any{"sandbox_id": r.sandbox, "action": "delete"}
		},
		check: wants(`"success":\s*true`)},
}

// wants passes a result whose text matches every pattern.
func wants(patterns ...string) func(*run, toolResult) string {
	return func(_ *run, res toolResult) string {
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(res.Text) {
				return fmt.Sprintf("lacks /%s/: %s", p, head(res.Text))
			}
		}
		return ""
	}
}

func head(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// run is one client's session against the stand-in: where the scenario is, and what each step found.
type run struct {
	mu      sync.Mutex
	client  string
	next    int // the step the model makes next
	repeats int
	calls   int             // tool calls made so far (the ID of the next)
	made    map[string]bool // the IDs of the model's calls
	read    map[string]bool // the results already read, by call ID
	sandbox string
	pid     string
	results []stepResult
	log     []string // what the client handed back, one line each
	// handed is where each result the client handed back is written whole, a JSON line each.
	handed io.Writer
}

type stepResult struct {
	step string
	pass bool
	note string
}

// nextCall is the model's next tool call, nil when the scenario is done.
func (r *run) nextCall() (string, map[string]any) {
	for r.next < len(scenario) {
		s := scenario[r.next]
		if args := s.args(r); args != nil {
			return s.tool, args
		}
		r.results = append(r.results, stepResult{s.name, true, "skipped: not needed"})
		r.next++
	}
	return "", nil
}

// record takes the result of the step last called.
func (r *run) record(res toolResult) {
	if r.next >= len(scenario) {
		return
	}
	s := scenario[r.next]
	r.log = append(r.log, fmt.Sprintf("%s: %d chars, %d images: %s", s.name, len(res.Text), res.Images, head(res.Text)))
	if r.handed != nil {
		line, _ := json.Marshal(map[string]any{"step": s.name, "tool": s.tool, "images": res.Images, "text": res.Text})
		fmt.Fprintf(r.handed, "%s\n", line)
	}
	if s.again != nil && s.again(r, res) && r.repeats < maxRepeats {
		r.repeats++
		return
	}
	note := s.check(r, res)
	pass := note == "" || strings.HasPrefix(note, "ok")
	if note == "" {
		note = "ok"
	}
	r.results = append(r.results, stepResult{s.name, pass, note})
	r.next++
	r.repeats = 0
}

// decodeImage says whether a data URL or base64 payload holds a PNG.
func isImage(b64 string) bool {
	if i := strings.Index(b64, ","); strings.HasPrefix(b64, "data:") && i > 0 {
		b64 = b64[i+1:]
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && len(raw) > 8 && string(raw[1:4]) == "PNG"
}
