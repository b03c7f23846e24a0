package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const readFileName = "e2b_read_file"

// DefaultReadLines is how many lines e2b_read_file returns when the call gives no limit.
const DefaultReadLines = 2000

// binarySniff is how much of a file's start decides whether it is text.
const binarySniff = 8 << 10

// readDefaults are the lines a read takes when the call gives no offset or limit.
var readDefaults = readArgs{Offset: new(1), Limit: new(DefaultReadLines)}

type readArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to read from."`
	Path      string `json:"path" policy:"path" jsonschema:"minLength=1" jsonschema_description:"File path; relative paths are under /home/user."`
	Offset    *int   `json:"offset,omitempty" jsonschema:"minimum=1" jsonschema_description:"Line number to start at (1 is the first line)."`
	Limit     *int   `json:"limit,omitempty" jsonschema:"minimum=1" jsonschema_description:"How many lines to return at most."`
}

// readResult puts what happened first and the content last: a client that keeps only the start of a long result
// still shows whether the file goes on and where the next read starts.
type readResult struct {
	SandboxID   string          `json:"sandbox_id"`
	Resumed     bool            `json:"resumed,omitempty" jsonschema_description:"True when the sandbox had been paused at its timeout and this call resumed it first; its files, and the processes started before, are as they were."`
	Path        string          `json:"path"`
	Truncated   bool            `json:"truncated" jsonschema_description:"True when the file goes on after content."`
	NextOffset  int             `json:"next_offset,omitempty" jsonschema_description:"The offset that continues the read, when truncated."`
	Size        int64           `json:"size" jsonschema_description:"The whole file's size in bytes."`
	StartLine   int             `json:"start_line" jsonschema_description:"Line number of the first line of content."`
	Lines       int             `json:"lines" jsonschema_description:"How many lines content holds."`
	Binary      bool            `json:"binary,omitempty" jsonschema_description:"True when the file is not UTF-8 text."`
	Image       *imagesafe.Info `json:"image,omitempty" jsonschema_description:"Set when the file is a PNG, JPEG, GIF or WebP image: it follows as image content (scaled down when it is over the limits), and content is empty."`
	Note        string          `json:"note,omitempty"`
	Content     string          `json:"content" jsonschema_description:"The lines read, as they are in the file (empty for a binary file read without offset/limit)."`
	attachments                 // its log, its files, an image
}

// readFile is e2b_read_file.
type readFile struct{ *base }

func (t readFile) tool() Tool {
	desc := fmt.Sprintf("Read a text file from a sandbox by lines. offset is the line to start at (default 1), limit the "+
		"number of lines (default %d); a result is kept within the result limit (what your client shows whole), so a long "+
		"file comes back in parts: truncated/next_offset say when it goes on and where. A PNG, JPEG, GIF or WebP image "+
		"(known by its content, not its name) comes back as image content you can see, scaled down to at most %d pixels on "+
		"its longer side and %d bytes; image files over %d bytes are refused. SVG is text and is read as text. Any other "+
		"binary file is not dumped: the answer gives its size and how to inspect it (xxd or base64 via e2b_exec, or an "+
		"explicit offset/limit). Directories are refused: list them with e2b_exec (ls -la).",
		DefaultReadLines, t.cfg.ImageMaxEdge, t.cfg.ImageLimitBytes, t.cfg.ImageSourceLimitBytes)
	return define(t.base, definition[readArgs, readResult]{
		name: readFileName, description: desc, images: true,
		hints:    hints{readOnly: true, destructive: false, idempotent: true, openWorld: true},
		defaults: readDefaults,
		run:      t.run,
	})
}

func (t readFile) run(ctx context.Context, call Caller, a *readArgs) (*readResult, error) {
	// A file read without offset or limit may be answered as an image, or as a note that it is binary; one read by
	// lines is read as text.
	explicit := a.Offset != nil || a.Limit != nil
	offset, limit := valueOr(a.Offset, *readDefaults.Offset), valueOr(a.Limit, *readDefaults.Limit)
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	rec, c := use.rec, use.c
	e := envd(c, rec)
	info, err := e.Stat(ctx, a.Path)
	switch {
	case errors.Is(err, e2b.ErrNotFound):
		return nil, userErrorf("No such file in sandbox '%s': %s", rec.ID, a.Path)
	case err != nil:
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	case info.Type == e2b.FileTypeDirectory:
		return nil, userErrorf("'%s' is a directory, not a file; list it with e2b_exec (ls -la %s).", a.Path,
			shellquote.Quote(a.Path))
	}
	res := readResult{SandboxID: rec.ID, Resumed: use.resumed, Path: a.Path, Size: info.Size, StartLine: offset}
	if info.Path != "" {
		res.Path = info.Path
	}

	body, _, err := e.Download(ctx, a.Path, e2b.DownloadOptions{})
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	sniff, err := br.Peek(binarySniff)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res.Binary = isBinary(sniff, len(sniff) == binarySniff)
	if mime := imagesafe.MIME(sniff); mime != "" && !explicit {
		return t.image(ctx, c, call, rec, res, br, mime)
	}
	if res.Binary && !explicit {
		res.Lines, res.StartLine = 0, 0
		res.Truncated = info.Size > 0
		res.Note = fmt.Sprintf("binary file (%d bytes), not shown as text; read a range with offset/limit to see "+
			"its lines anyway, or run `xxd %s | head` or `base64 %s` via e2b_exec.", info.Size, shellquote.Quote(res.Path),
			shellquote.Quote(res.Path))
		return &res, nil
	}

	if err := skipLines(br, offset-1); err != nil {
		if errors.Is(err, io.EOF) {
			res.Note = fmt.Sprintf("the file has fewer than %d lines", offset)
			res.Lines = 0
			return &res, nil
		}
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	var binaryNote string
	if res.Binary {
		binaryNote = "binary file: bytes that are not UTF-8 are shown as \uFFFD"
	}
	cutNote := fmt.Sprintf("line %d is longer than one result holds (the result limit is %d characters) and was "+
		"cut; see it with e2b_exec (e.g. sed -n '%dp' %s | cut -c 1-2000).", offset, t.limit(ctx), offset,
		shellquote.Quote(res.Path))
	// The content gets what the other fields leave of the limit, at their largest.
	probe := res
	probe.Truncated, probe.NextOffset, probe.Note = true, offset+limit, joinWarnings(binaryNote, cutNote)
	content, lines, more, cut, err := readLines(br, limit, t.limit(ctx)-sizeOf(probe))
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res.Lines = lines
	res.Content = content
	res.Note = binaryNote
	if res.Binary {
		res.Content = strings.ToValidUTF8(content, "\uFFFD")
	}
	if more {
		res.Truncated = true
		res.NextOffset = offset + lines
	}
	if cut {
		res.Note = joinWarnings(res.Note, cutNote)
	}
	return &res, nil
}

// image answers with an image file as image content, scaled down to the limits when it is over them.
func (t readFile) image(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord, res readResult,
	body io.Reader, mime string) (*readResult, error) {
	shrink := fmt.Sprintf("Make a smaller copy in the sandbox and read that instead (e.g. save the chart with a lower "+
		"dpi or size, or `convert %s -resize 1024x1024 small.png` where ImageMagick is installed); to hand the file "+
		"itself to the user, make a link with e2b_download_url.", shellquote.Quote(res.Path))
	if res.Size > int64(t.cfg.ImageSourceLimitBytes) {
		return nil, userErrorf("'%s' is a %s image of %d bytes, over the %d bytes e2b_read_file fetches "+
			"to show an image. %s", res.Path, imagesafe.FormatName(mime), res.Size, t.cfg.ImageSourceLimitBytes, shrink)
	}
	data, err := io.ReadAll(io.LimitReader(body, int64(t.cfg.ImageSourceLimitBytes)+1))
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	if len(data) > t.cfg.ImageSourceLimitBytes {
		// It grew between the stat and the read.
		return nil, userErrorf("'%s' is a %s image of more than %d bytes, which e2b_read_file does not fetch "+
			"to show an image. %s", res.Path, imagesafe.FormatName(mime), t.cfg.ImageSourceLimitBytes, shrink)
	}
	lim := imagesafe.Limits{MaxBytes: t.cfg.ImageLimitBytes, MaxEdge: t.cfg.ImageMaxEdge,
		MaxPixels: imagesafe.DefaultMaxPixels, MaxDecodeBytes: imagesafe.DefaultMaxDecodeBytes}
	out, info, err := imagesafe.Fit(ctx, data, mime, lim, t.scaling, call.Owner)
	var tooLarge *imagesafe.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, userErrorf("'%s' cannot be shown: %s. %s", res.Path, tooLarge.Reason, shrink)
	case errors.Is(err, imagesafe.ErrBusy):
		return nil, userErrorf("'%s' was not shown: %v, and this one waited its turn for %v; try again in a moment.",
			res.Path, err, imagesafe.SlotsWait)
	case ctx.Err() != nil:
		return nil, err
	case err != nil:
		return nil, userErrorf("'%s' cannot be shown: %v. Inspect it with e2b_exec (e.g. file %s).", res.Path, err,
			shellquote.Quote(res.Path))
	}
	res.Binary, res.Image = true, &info
	res.Size = int64(len(data))
	res.StartLine = 0
	res.Note = fmt.Sprintf("%s image, %d×%d, shown as image content", imagesafe.FormatName(mime), info.Width, info.Height)
	if info.Scaled {
		res.Note = fmt.Sprintf("%s image of %d×%d pixels and %d bytes, shown scaled down to %d×%d (%s, %d bytes) to "+
			"fit the limits; the file is unchanged", imagesafe.FormatName(mime), info.SourceWidth, info.SourceHeight,
			len(data), info.Width, info.Height, imagesafe.FormatName(info.MIMEType), info.Bytes)
	}
	if !clientOf(ctx).Images {
		// The image content still goes with the result, for a client that shows it to the user.
		w, h := info.Width, info.Height
		if info.Scaled {
			w, h = info.SourceWidth, info.SourceHeight
		}
		res.Note = fmt.Sprintf("%s image, %d×%d pixels, %d bytes, sent as image content; but %s",
			imagesafe.FormatName(mime), w, h, len(data), t.unseenImage(ctx, c, rec, res.Path))
	}
	res.attach(mcp.NewImageContent(base64.StdEncoding.EncodeToString(out), info.MIMEType))
	return &res, nil
}

// isBinary says whether a file's first bytes look like anything but UTF-8 text. partial is true when more of the
// file follows, so that a multi-byte character cut at the end of the sample does not count against it.
func isBinary(sample []byte, partial bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if partial {
		sample = trimPartialRuneEnd(sample)
	}
	return !utf8.Valid(sample)
}

// skipLines reads past n lines; io.EOF means that nothing follows them.
func skipLines(br *bufio.Reader, n int) error {
	if n == 0 {
		return nil
	}
	for i := 0; i < n; i++ {
		for {
			_, err := br.ReadSlice('\n')
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return err
		}
	}
	if _, err := br.Peek(1); err != nil {
		return err
	}
	return nil
}

// readLines reads up to limit lines that cost at most room in the result (see fieldCost); more says whether the
// file goes on after them. A line that does not fit is left for the next read, unless it is the first: then its
// start is returned and cut is true.
func readLines(br *bufio.Reader, limit, room int) (content string, lines int, more, cut bool, err error) {
	var out []byte
	used := 0
	for lines < limit && used < room {
		start := len(out)
		for {
			chunk, rerr := br.ReadSlice('\n')
			if len(chunk) == 0 && errors.Is(rerr, io.EOF) {
				return string(out), lines, false, false, nil
			}
			// A chunk that ends inside a character (a full buffer) overstates its cost a little: never too much.
			cost := fieldCost(chunk)
			if used+cost > room {
				if lines > 0 {
					return string(out[:start]), lines, true, false, nil
				}
				out = append(out, chunk[:headWithin(chunk, room-used)]...)
				return string(trimPartialRuneEnd(out)), 1, true, true, nil
			}
			used += cost
			out = append(out, chunk...)
			switch {
			case rerr == nil:
			case errors.Is(rerr, bufio.ErrBufferFull):
				continue
			case errors.Is(rerr, io.EOF):
				return string(out), lines + 1, false, false, nil
			default:
				return "", 0, false, false, rerr
			}
			break
		}
		lines++
	}
	_, perr := br.Peek(1)
	return string(out), lines, perr == nil, false, nil
}
