package e2b

import (
	"context"
	"strings"
)

// fileWriterScript writes its stdin to the file $1, made with its directory, saying on stderr that the file is
// open first; cat writes each piece as it comes.
const fileWriterScript = `mkdir -p -- "$(dirname -- "$1")" && exec >"$1" && echo open >&2 && exec cat`

// FileWriter writes a file in the sandbox piece by piece as its bytes arrive, through the stdin of a cat in the
// sandbox: what has been written is in the file at once, for anyone reading it while more comes. /files can only
// replace a file whole.
type FileWriter struct {
	e    *Envd
	ctx  context.Context
	pid  uint32
	done chan struct{} // closed when the cat's stream ended, with end and err set
	end  ProcessEnd
	err  error
}

// NewFileWriter creates (or empties) the file at path and returns a writer to it, on ctx for every write and
// for the cat itself. Close it to finish the file.
func (e *Envd) NewFileWriter(ctx context.Context, path string) (*FileWriter, error) {
	w := &FileWriter{e: e, ctx: ctx, done: make(chan struct{})}
	opened := make(chan struct{})
	var stderr []byte
	go func() {
		defer close(w.done)
		w.end, w.err = e.Start(ctx, StartOptions{
			Process: ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", fileWriterScript, wrapperArg0, path}},
			Stdin:   true,
		}, func(ev ProcessEvent) {
			switch {
			case ev.Kind == EventStart:
				w.pid = ev.PID
			case ev.Kind == EventStderr && len(stderr) < 4096:
				if stderr = append(stderr, ev.Data...); string(stderr) == "open\n" {
					close(opened)
				}
			}
		})
	}()
	select {
	case <-opened:
		return w, nil
	case <-w.done:
		if w.err == nil {
			w.err = errorf("writing "+path, ErrInvalidArgument, "the file could not be made: %s",
				strings.TrimSpace(string(stderr)))
		}
		return nil, w.err
	}
}

// Write sends p to the file.
func (w *FileWriter) Write(p []byte) (int, error) {
	select {
	case <-w.done:
		return 0, w.closedError()
	default:
	}
	if err := w.e.SendStdin(w.ctx, w.pid, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close ends the file and waits until all that was written is in it.
func (w *FileWriter) Close() error {
	select {
	case <-w.done:
	default:
		if err := w.e.CloseStdin(w.ctx, w.pid); err != nil {
			return err
		}
		<-w.done
	}
	if w.err == nil && w.end.ExitCode == 0 {
		return nil
	}
	return w.closedError()
}

// closedError says why a writer whose cat has ended cannot take more.
func (w *FileWriter) closedError() error {
	if w.err != nil {
		return w.err
	}
	return errorf("file writer", ErrBadAnswer, "the writer ended: %s", w.end.Status)
}
