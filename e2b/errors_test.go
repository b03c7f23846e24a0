package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// An error's text keeps the head and the tail of a long E2B message (envd repeats a command it could not start,
// with the reason at the end) and leaves out the middle, so that a 2 MiB command is not a 2 MiB error.
func TestAPIErrorClipsLongMessages(t *testing.T) {
	msg := "error starting process '" + strings.Repeat("é", 1<<20) + "': fork/exec /usr/bin/setsid: argument list too long"
	text := (&APIError{Op: "envd Start", Status: 400, Code: "invalid_argument", Message: msg}).Error()
	if len(text) > 2*maxMessage {
		t.Fatalf("error text of %d bytes", len(text))
	}
	for _, want := range []string{"E2B API error (envd Start: 400 invalid_argument): error starting process 'éé", "bytes left out", "argument list too long"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q lacks %q", text[:200], want)
		}
	}
	if !utf8.ValidString(text) {
		t.Errorf("error text is not valid UTF-8")
	}
	short := (&APIError{Op: "envd Stat", Status: 404, Message: "file not found"}).Error()
	if short != "E2B API error (envd Stat: 404): file not found" {
		t.Errorf("short message changed: %q", short)
	}
}

// Each kind of failure, made for real against a server on 127.0.0.1, is recognised by errors.Is as its kind and
// as no other, by errors.As as the type it is, and both still when the error is wrapped or joined with another,
// as callers do.
func TestErrorKindsThroughWrapping(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }
	envdAt := func(t *testing.T, handle func(http.ResponseWriter, *http.Request, []byte), mods ...func(*Config)) *Envd {
		f := newFakeEnvd(t, handle)
		cfg := Config{APIKey: testAPIKey, SandboxURL: f.srv.URL, RequestTimeout: 50 * time.Millisecond}
		for _, m := range mods {
			m(&cfg)
		}
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c.Envd(SandboxConn{ID: "sbx1", EnvdVersion: "0.6.13", AccessToken: testToken})
	}
	controlPlane := func(t *testing.T, url string, mods ...func(*Config)) *Client {
		return cpClient(t, url, append([]func(*Config){func(cfg *Config) { cfg.MaxRetries = 0 }}, mods...)...)
	}
	answering := func(t *testing.T, status int, body string) string {
		f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		})
		return f.srv.URL
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, c := range []struct {
		name  string
		call  func(t *testing.T) error
		kinds []error // every kind the error matches; it must match no other
		api   bool    // an *APIError rather than an *Error
	}{
		{"connection refused", func(t *testing.T) error {
			_, err := controlPlane(t, cpDeadURL(t)).GetSandbox(context.Background(), "abc")
			return err
		}, []error{ErrNoAnswer}, false},
		{"control-plane request timeout", func(t *testing.T) error {
			_, err := controlPlane(t, newFakeEnvd(t, hang).srv.URL, func(cfg *Config) { cfg.RequestTimeout = 50 * time.Millisecond }).
				GetSandbox(context.Background(), "abc")
			return err
		}, []error{ErrNoAnswer, ErrTimeout, context.DeadlineExceeded}, false},
		{"download answer not in time", func(t *testing.T) error {
			_, _, err := envdAt(t, hang).Download(context.Background(), "/f", DownloadOptions{})
			return err
		}, []error{ErrNoAnswer, ErrTimeout}, false},
		{"caller's deadline", func(t *testing.T) error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			_, err := envdAt(t, hang, func(cfg *Config) { cfg.RequestTimeout = time.Minute }).Stat(ctx, "/f")
			return err
		}, []error{ErrTimeout, context.DeadlineExceeded}, false},
		{"cancelled", func(t *testing.T) error {
			_, err := controlPlane(t, cpDeadURL(t)).CreateSandbox(cancelled, NewSandbox{TemplateID: "base"})
			return err
		}, []error{context.Canceled}, false},
		{"stream cut", func(t *testing.T) error {
			e := envdAt(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				writeFrames(w, frame(0, `{"event":{"start":{"pid":1}}}`))
			})
			_, err := e.Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "x"}}, nil)
			return err
		}, []error{ErrStreamCut}, false},
		{"bad answer", func(t *testing.T) error {
			_, err := envdAt(t, answer("not json")).Stat(context.Background(), "/f")
			return err
		}, []error{ErrBadAnswer}, false},
		{"bad input", func(t *testing.T) error {
			_, err := envdAt(t, answerAll).ListDir(context.Background(), "/", -1)
			return err
		}, []error{ErrInvalidArgument}, false},
		{"bad sandbox ID", func(t *testing.T) error {
			_, err := controlPlane(t, cpDeadURL(t)).GetSandbox(context.Background(), "../abc")
			return err
		}, []error{ErrInvalidArgument}, false},
		{"no API key", func(t *testing.T) error {
			_, err := controlPlane(t, cpDeadURL(t), func(cfg *Config) { cfg.APIKey = "" }).GetSandbox(context.Background(), "abc")
			return err
		}, []error{ErrUnauthorized}, false},
		{"sandbox gone", func(t *testing.T) error {
			e := envdAt(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte(`{"sandboxId":"sbx1","message":"The sandbox was not found","code":502}`))
			})
			_, err := e.Stat(context.Background(), "/f")
			return err
		}, []error{ErrSandboxGone}, true},
		{"not found", func(t *testing.T) error {
			_, err := controlPlane(t, answering(t, 404, `{"code":404,"message":"sandbox abc not found"}`)).GetSandbox(context.Background(), "abc")
			return err
		}, []error{ErrNotFound}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(t)
			if err == nil {
				t.Fatal("no error")
			}
			for _, form := range []error{err, fmt.Errorf("reading a file: %w", err), errors.Join(errors.New("another failure"), err)} {
				for _, kind := range []error{ErrNoAnswer, ErrTimeout, ErrStreamCut, ErrBadAnswer, ErrInvalidArgument,
					ErrUnauthorized, ErrSandboxGone, ErrNotFound, ErrConflict, ErrRateLimited, context.Canceled, context.DeadlineExceeded} {
					if want := slices.Contains(c.kinds, kind); errors.Is(form, kind) != want {
						t.Errorf("errors.Is(%q, %v) = %v, want %v", form, kind, !want, want)
					}
				}
				var ce *Error
				var ae *APIError
				if errors.As(form, &ce) == c.api || errors.As(form, &ae) != c.api {
					t.Errorf("%q (%T): *Error %v, *APIError %v", form, err, ce != nil, ae != nil)
				}
				if ce != nil && (ce.Op == "" || !strings.HasPrefix(ce.Error(), "e2b: "+ce.Op+": ")) {
					t.Errorf("%q names no call", ce)
				}
			}
		})
	}
}
