package emulator

import (
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// /files: file content, as envd's GetFiles and PostFiles answer it.

// envdJSONError answers a plain (non-Connect) envd error: {"code":<status>,"message":...}.
func envdJSONError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

// filesParams are the query parameters of /files. Pointers are nil when the parameter is absent.
type filesParams struct {
	path       string
	pathSet    bool
	username   *string
	signature  *string
	expiration *int64
}

func parseFilesParams(r *http.Request) (filesParams, error) {
	q := r.URL.Query()
	var p filesParams
	p.path, p.pathSet = q.Get("path"), q.Has("path")
	if q.Has("username") {
		v := q.Get("username")
		p.username = &v
	}
	if q.Has("signature") {
		v := q.Get("signature")
		p.signature = &v
	}
	if q.Has("signature_expiration") {
		n, err := strconv.ParseInt(q.Get("signature_expiration"), 10, 64)
		if err != nil {
			//lint:ignore ST1005 envd's own words (its oapi-codegen router's), which the emulator answers as they are
			return p, fmt.Errorf("Invalid format for parameter signature_expiration: %v", err)
		}
		p.expiration = &n
	}
	return p, nil
}

// fileSignature is envd's v1 signature of a /files URL.
func fileSignature(filePath, operation, username, token string, expiration *int64) string {
	raw := filePath + ":" + operation + ":" + username + ":" + token
	if expiration != nil {
		raw += ":" + strconv.FormatInt(*expiration, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// validateSigning is envd's check of /files requests of a secure sandbox: the header token, or a valid
// signature (not expired) of this path, operation and user.
func validateSigning(r *http.Request, token string, p filesParams, operation string, now time.Time) error {
	if token == "" {
		return nil
	}
	if h := r.Header.Get("X-Access-Token"); h != "" {
		if subtle.ConstantTimeCompare([]byte(h), []byte(token)) != 1 {
			return errors.New("access token present in header but does not match")
		}
		return nil
	}
	if p.signature == nil {
		return errors.New("missing signature query parameter")
	}
	user := ""
	if p.username != nil {
		user = *p.username
	}
	want := fileSignature(p.path, operation, user, token, p.expiration)
	if subtle.ConstantTimeCompare([]byte(want), []byte(*p.signature)) != 1 {
		return errors.New("invalid signature")
	}
	if p.expiration != nil && *p.expiration < now.Unix() {
		return errors.New("signature is already expired")
	}
	return nil
}

// filesUser resolves the user of a /files request: the username parameter, else the sandbox's default.
func filesUser(w http.ResponseWriter, p filesParams, v sandboxView) (sandboxUser, bool) {
	name := v.defaultUser
	if p.username != nil {
		name = *p.username
	}
	if name == "" {
		envdJSONError(w, http.StatusBadRequest, "username not provided")
		return sandboxUser{}, false
	}
	u, ok := lookupSandboxUser(name)
	if !ok {
		envdJSONError(w, http.StatusUnauthorized, fmt.Sprintf("error looking up user '%s': user: unknown user %s", name,
			name))
		return sandboxUser{}, false
	}
	return u, true
}

// filesParams reads the parameters of a /files request for op ("read" or "write") and checks its access token
// or signature, answering the request when they fail.
func (e *envdService) filesParams(w http.ResponseWriter, r *http.Request, v sandboxView,
	op string) (filesParams, bool) {
	p, err := parseFilesParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return filesParams{}, false
	}
	if err := validateSigning(r, v.token, p, op, e.now()); err != nil {
		envdJSONError(w, http.StatusUnauthorized, err.Error())
		return filesParams{}, false
	}
	return p, true
}

func (e *envdService) getFiles(w http.ResponseWriter, r *http.Request, v sandboxView) {
	p, ok := e.filesParams(w, r, v, "read")
	if !ok {
		return
	}
	u, ok := filesUser(w, p, v)
	if !ok {
		return
	}
	target, err := expandPath(p.path, u, v.defaultWorkdir)
	if err != nil {
		envdJSONError(w, http.StatusBadRequest, fmt.Sprintf("error expanding and resolving path '%s': %v", p.path, err))
		return
	}
	sfs := newSandboxFS(v.dir, e.started)
	defer sfs.close()
	resolved, fi, err := sfs.stat(target)
	if err != nil {
		if isNotExist(err) {
			envdJSONError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", target))
			return
		}
		envdJSONError(w, http.StatusInternalServerError, fmt.Sprintf("error checking if path exists '%s': %v", target,
			pathErr("stat", target, err)))
		return
	}
	if fi.IsDir() {
		envdJSONError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", target))
		return
	}
	root, rel, err := sfs.locate(resolved)
	var f *os.File
	if err == nil {
		f, err = root.Open(rel)
	}
	if err != nil {
		envdJSONError(w, http.StatusInternalServerError, fmt.Sprintf("error opening file '%s': %v", target,
			pathErr("open", target, err)))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(target)}))
	w.Header().Set("Vary", "Accept-Encoding")
	// Range and conditional requests are served as they are (206, 304); otherwise gzip when the client asks.
	conditional := r.Header.Get("Range") != "" || r.Header.Get("If-Modified-Since") != "" ||
		r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Range") != ""
	if !conditional && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		contentType := mime.TypeByExtension(path.Ext(p.path))
		if contentType == "" {
			contentType = "application/octet-stream"
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.Copy(zw, f)
		_ = zw.Close()
		return
	}
	http.ServeContent(w, r, p.path, fi.ModTime(), f)
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a non-zero quality.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := strings.TrimSpace(params)
		if v, ok := strings.CutPrefix(q, "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
				continue
			}
		}
		return true
	}
	return false
}

// uploadError is a failed upload with its HTTP status.
type uploadError struct {
	status int
	err    error
}

func (e *envdService) postFiles(w http.ResponseWriter, r *http.Request, v sandboxView) {
	p, ok := e.filesParams(w, r, v, "write")
	if !ok {
		return
	}
	body := io.Reader(r.Body)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			envdJSONError(w, http.StatusBadRequest, fmt.Sprintf("error decompressing request body: %v", err))
			return
		}
		defer zr.Close()
		body = zr
	default:
		envdJSONError(w, http.StatusBadRequest, fmt.Sprintf("error decompressing request body: unsupported "+
			"Content-Encoding: %s", enc))
		return
	}
	u, ok := filesUser(w, p, v)
	if !ok {
		return
	}
	sfs := newSandboxFS(v.dir, e.started)
	defer sfs.close()

	contentType := r.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var entries []envd.WriteInfo
	var uerr *uploadError
	switch {
	case mediaType == "application/octet-stream":
		entries, uerr = rawUpload(sfs, body, r.ContentLength, p, u, v)
	case strings.HasPrefix(mediaType, "multipart/"):
		r.Body = io.NopCloser(body)
		entries, uerr = multipartUpload(sfs, r, p, u, v)
	default:
		uerr = &uploadError{http.StatusBadRequest, fmt.Errorf("unsupported content type: %s, expected multipart/form-data "+
			"or application/octet-stream", contentType)}
	}
	if uerr != nil {
		envdJSONError(w, uerr.status, uerr.err.Error())
		return
	}
	data, _ := json.Marshal(entries)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func rawUpload(sfs *sandboxFS, body io.Reader, length int64, p filesParams, u sandboxUser,
	v sandboxView) ([]envd.WriteInfo, *uploadError) {
	if !p.pathSet {
		return nil, &uploadError{http.StatusBadRequest, errors.New("path query parameter is required for raw body upload")}
	}
	target, err := expandPath(p.path, u, v.defaultWorkdir)
	if err != nil {
		return nil, &uploadError{http.StatusBadRequest, fmt.Errorf("error resolving path: %w", err)}
	}
	if uerr := writeFile(sfs, target, body, length); uerr != nil {
		return nil, uerr
	}
	return []envd.WriteInfo{{Name: path.Base(target), Path: target, Type: "file"}}, nil
}

func multipartUpload(sfs *sandboxFS, r *http.Request, p filesParams, u sandboxUser,
	v sandboxView) ([]envd.WriteInfo, *uploadError) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, &uploadError{http.StatusInternalServerError, fmt.Errorf("error parsing multipart form: %w", err)}
	}
	entries := []envd.WriteInfo{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, &uploadError{http.StatusInternalServerError, fmt.Errorf("error reading form: %w", err)}
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		name := p.path
		if !p.pathSet {
			// The whole filename is the target path; Part.FileName would keep only its base name.
			_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			if err != nil || params["filename"] == "" {
				part.Close()
				return nil, &uploadError{http.StatusBadRequest, errors.New("error resolving path: error getting multipart custom " +
					"part file name: the part has no filename")}
			}
			name = params["filename"]
		}
		target, err := expandPath(name, u, v.defaultWorkdir)
		if err != nil {
			part.Close()
			return nil, &uploadError{http.StatusBadRequest, fmt.Errorf("error resolving path: %w", err)}
		}
		for _, done := range entries {
			if done.Path == target {
				part.Close()
				return nil, &uploadError{http.StatusBadRequest, fmt.Errorf("you cannot upload multiple files to the same path "+
					"'%s' in one upload request, only the first specified file was uploaded", target)}
			}
		}
		uerr := writeFile(sfs, target, part, -1)
		part.Close()
		if uerr != nil {
			return nil, uerr
		}
		entries = append(entries, envd.WriteInfo{Name: path.Base(target), Path: target, Type: "file"})
	}
}

// writeFile is envd's processFile: parents are created, an existing file is truncated, a directory refused.
func writeFile(sfs *sandboxFS, target string, content io.Reader, length int64) *uploadError {
	if err := sfs.ensureDirs(path.Dir(target)); err != nil {
		return &uploadError{http.StatusInternalServerError, fmt.Errorf("error ensuring directories: %w", err)}
	}
	resolved, fi, err := sfs.stat(target)
	switch {
	case err == nil && fi.IsDir():
		return &uploadError{http.StatusBadRequest, fmt.Errorf("path is a directory: %s", target)}
	case err != nil:
		var pe *fs.PathError
		if !isNotExist(err) || !errors.As(err, &pe) || pe.Path != resolved {
			return &uploadError{http.StatusInternalServerError, fmt.Errorf("error getting file info: %w",
				pathErr("stat", target, err))}
		}
	}
	root, rel, err := sfs.locate(resolved)
	var f *os.File
	if err == nil {
		f, err = root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	} else {
		err = errReadOnly
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return &uploadError{http.StatusInsufficientStorage, fmt.Errorf("not enough inodes available: %w",
				pathErr("open", target, err))}
		}
		return &uploadError{http.StatusInternalServerError, fmt.Errorf("error opening file: %w",
			pathErr("open", target, err))}
	}
	defer f.Close()
	if _, err := f.ReadFrom(content); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			msg := "not enough disk space available"
			if length > 0 {
				msg = fmt.Sprintf("attempted to write %d bytes: %s", length, msg)
			}
			return &uploadError{http.StatusInsufficientStorage, errors.New(msg)}
		}
		return &uploadError{http.StatusInternalServerError, fmt.Errorf("error writing file: %w", err)}
	}
	return nil
}
