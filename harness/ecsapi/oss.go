package ecsapi

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// OSS limits the emulator enforces, as the service documents them.
const (
	minPartSize = 100 << 10
	maxParts    = 10000
)

var crcTable = crc64.MakeTable(crc64.ECMA) // what x-oss-hash-crc64ecma carries

type bucket struct {
	objects map[string]*object
}

type object struct {
	size        int64
	etag        string // quoted, as OSS sends it
	crc         uint64
	modified    time.Time
	contentType string
}

type upload struct {
	bucket, key, contentType string
	parts                    map[int]*object
}

// CreateBucket is test setup: OSS buckets are made outside drover.
func (s *Server) CreateBucket(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] == nil {
		s.buckets[name] = &bucket{objects: map[string]*object{}}
	}
}

// ObjectPath is the local file that holds bucket/key, so a launcher can boot
// the imported bytes. Treat it as read-only (boot through an overlay): a
// later PutObject of the same key replaces the file by rename.
func (s *Server) ObjectPath(bucket, key string) string { return s.objectPath(bucket, key) }

func (s *Server) objectPath(bucket, key string) string {
	sum := sha256.Sum256([]byte(key)) // keys may be 1023 bytes of anything
	return filepath.Join(s.dir, "objects", bucket, hex.EncodeToString(sum[:]))
}

func (s *Server) objectExists(bucket, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucket]
	return b != nil && b.objects[key] != nil
}

type ossError struct {
	status    int
	code, msg string
}

func ossErr(status int, code, msg string) *ossError { return &ossError{status, code, msg} }

var (
	errNoSuchBucket = ossErr(404, "NoSuchBucket", "The specified bucket does not exist.")
	errNoSuchKey    = ossErr(404, "NoSuchKey", "The specified key does not exist.")
	errNoSuchUpload = ossErr(404, "NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
)

// OSSHandler serves OSS with path-style addressing (http://host:port/bucket/key),
// which the v2 SDK uses by itself for an IP endpoint and with UsePathStyle.
func (s *Server) OSSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := strings.ReplaceAll(newRequestID(), "-", "")[:24]
		w.Header().Set("x-oss-request-id", rid)
		e := s.serveOSS(w, r)
		status := 200
		if e != nil {
			status = e.status
			body, _ := xml.Marshal(struct {
				XMLName   xml.Name `xml:"Error"`
				Code      string
				Message   string
				RequestId string
				HostId    string
			}{Code: e.code, Message: e.msg, RequestId: rid, HostId: r.Host})
			body = append([]byte(xml.Header), body...)
			w.Header().Set("Content-Type", "application/xml")
			if r.Method == http.MethodHead {
				// A HEAD answer has no body; the SDK reads the error from x-oss-err.
				w.Header().Set("x-oss-err", base64.StdEncoding.EncodeToString(body))
				w.WriteHeader(e.status)
			} else {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.WriteHeader(e.status)
				_, _ = w.Write(body)
			}
		}
		part := "" // which part of a multipart upload: the order is the tests' to see
		if n := r.URL.Query().Get("partNumber"); n != "" && r.Method == http.MethodPut {
			part = " part " + n
		}
		s.logf("oss %s %s %d %s%s", r.Method, r.URL.Path, status, rid, part)
	})
}

func (s *Server) serveOSS(w http.ResponseWriter, r *http.Request) *ossError {
	if e := s.checkOSSAuth(r); e != nil {
		return e
	}
	bkt, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bkt == "" {
		return ossErr(400, "InvalidBucketName", "The specified bucket is not valid.")
	}
	if !s.bucketExists(bkt) {
		return errNoSuchBucket
	}
	q := r.URL.Query()
	switch {
	case key == "" && r.Method == http.MethodGet:
		return s.listObjects(w, r, bkt)
	case key == "":
		return ossErr(405, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	case r.Method == http.MethodPost && q.Has("uploads"):
		return s.initiateUpload(w, r, bkt, key)
	case r.Method == http.MethodPut && q.Has("uploadId"):
		return s.uploadPart(w, r, q.Get("uploadId"), q.Get("partNumber"))
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return s.completeUpload(w, r, bkt, key, q.Get("uploadId"))
	case r.Method == http.MethodGet && q.Has("uploadId"):
		return s.listParts(w, r, bkt, key, q.Get("uploadId"))
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return s.abortUpload(w, q.Get("uploadId"))
	case r.Method == http.MethodPut:
		return s.putObject(w, r, bkt, key)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return s.getObject(w, r, bkt, key)
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		delete(s.buckets[bkt].objects, key)
		s.mu.Unlock()
		_ = os.Remove(s.objectPath(bkt, key))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return ossErr(405, "MethodNotAllowed", "The specified method is not allowed against this resource.")
}

// checkOSSAuth accepts requests made with the configured AccessKeyId, signed
// (V4 or V1 header, or a presigned URL); signatures themselves are not verified.
func (s *Server) checkOSSAuth(r *http.Request) *ossError {
	var id string
	a := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(a, "OSS4-HMAC-SHA256 "):
		_, cred, _ := strings.Cut(a, "Credential=")
		id, _, _ = strings.Cut(cred, "/")
	case strings.HasPrefix(a, "OSS "):
		id, _, _ = strings.Cut(strings.TrimPrefix(a, "OSS "), ":")
	case r.URL.Query().Get("x-oss-credential") != "":
		id, _, _ = strings.Cut(r.URL.Query().Get("x-oss-credential"), "/")
	default:
		id = r.URL.Query().Get("OSSAccessKeyId")
	}
	switch {
	case id == "":
		return ossErr(403, "AccessDenied", "Anonymous access is forbidden for this operation.")
	case id != s.cfg.AccessKeyID:
		return ossErr(403, "InvalidAccessKeyId", "The OSS Access Key Id you provided does not exist in our records.")
	}
	return nil
}

func (s *Server) bucketExists(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buckets[name] != nil
}

// receive streams the request's body into a new file under dir/tmp,
// keeping zero blocks sparse (images are mostly zeros), and returns it with
// its MD5 and CRC-64. A body shorter than its Content-Length (a client cut
// off mid-part) is refused and kept nowhere: OSS refuses a body whose size
// differs from Content-Length (help.aliyun.com/zh/oss/support/0017-00000505;
// the page names no error code, the emulator answers IncompleteBody, 400),
// and a resumed upload must not find a truncated part listed as uploaded.
func (s *Server) receive(r *http.Request) (path string, o *object, e *ossError) {
	body := r.Body
	tmp := filepath.Join(s.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", nil, ossErr(500, "InternalError", err.Error())
	}
	f, err := os.CreateTemp(tmp, "put-")
	if err != nil {
		return "", nil, ossErr(500, "InternalError", err.Error())
	}
	defer f.Close()
	md, crc := md5.New(), crc64.New(crcTable)
	n, err := writeSparse(f, 0, body, md, crc)
	if err == nil && r.ContentLength >= 0 && n != r.ContentLength {
		err = fmt.Errorf("%d bytes of the %d Content-Length announced", n, r.ContentLength)
	}
	if err == nil {
		err = f.Truncate(n)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", nil, ossErr(400, "IncompleteBody", fmt.Sprintf("The request body could not be read: %v", err))
	}
	return f.Name(), &object{size: n, etag: quotedMD5(md), crc: crc.Sum64(), modified: time.Now()}, nil
}

func quotedMD5(h hash.Hash) string {
	return `"` + strings.ToUpper(hex.EncodeToString(h.Sum(nil))) + `"`
}

// writeSparse copies r to f at off and skips writing all-zero 64 KiB blocks,
// so a sparse disk image stays sparse on disk.
func writeSparse(f *os.File, off int64, r io.Reader, hs ...hash.Hash) (int64, error) {
	const blk = 64 << 10
	buf := make([]byte, 16*blk)
	var n int64
	for {
		k, err := io.ReadFull(r, buf)
		chunk := buf[:k]
		for _, h := range hs {
			h.Write(chunk)
		}
		for i := 0; i < k; i += blk {
			b := chunk[i:min(i+blk, k)]
			if !allZero(b) {
				if _, werr := f.WriteAt(b, off+n+int64(i)); werr != nil {
					return n, werr
				}
			}
		}
		n += int64(k)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// commit moves a received file into place as bucket/key.
func (s *Server) commit(bkt, key, tmp string, o *object) *ossError {
	dst := s.objectPath(bkt, key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return ossErr(500, "InternalError", err.Error())
	}
	if err := os.Rename(tmp, dst); err != nil {
		return ossErr(500, "InternalError", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bkt]
	if b == nil {
		return errNoSuchBucket
	}
	b.objects[key] = o
	return nil
}

func (s *Server) putObject(w http.ResponseWriter, r *http.Request, bkt, key string) *ossError {
	tmp, o, e := s.receive(r)
	if e != nil {
		return e
	}
	o.contentType = r.Header.Get("Content-Type")
	if e := s.commit(bkt, key, tmp, o); e != nil {
		return e
	}
	w.Header().Set("ETag", o.etag)
	w.Header().Set("x-oss-hash-crc64ecma", strconv.FormatUint(o.crc, 10))
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObject(w http.ResponseWriter, r *http.Request, bkt, key string) *ossError {
	s.mu.Lock()
	o := s.buckets[bkt].objects[key]
	s.mu.Unlock()
	if o == nil {
		return errNoSuchKey
	}
	f, err := os.Open(s.objectPath(bkt, key))
	if err != nil {
		return errNoSuchKey
	}
	defer f.Close()
	w.Header().Set("ETag", o.etag)
	w.Header().Set("x-oss-hash-crc64ecma", strconv.FormatUint(o.crc, 10))
	w.Header().Set("x-oss-object-type", "Normal")
	w.Header().Set("x-oss-storage-class", "Standard")
	if o.contentType != "" {
		w.Header().Set("Content-Type", o.contentType)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	// ServeContent answers HEAD, Range and the conditional headers as OSS does.
	http.ServeContent(w, r, "", o.modified, f)
	return nil
}

// encodeKey applies encoding-type=url, which the v2 SDK always requests for
// uploads and listings and decodes with url.QueryUnescape.
func encodeKey(r *http.Request, key string) string {
	if r.URL.Query().Get("encoding-type") == "url" {
		return url.QueryEscape(key)
	}
	return key
}

func encodingType(r *http.Request) string { return r.URL.Query().Get("encoding-type") }

func writeXML(w http.ResponseWriter, v any) *ossError {
	body, err := xml.Marshal(v)
	if err != nil {
		return ossErr(500, "InternalError", err.Error())
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append([]byte(xml.Header), body...))
	return nil
}

type listEntry struct {
	Key          string
	LastModified string
	ETag         string
	Type         string
	Size         int64
	StorageClass string
}

// listObjects answers ListObjects (marker) and ListObjectsV2 (list-type=2,
// continuation-token); delimiters are not emulated.
func (s *Server) listObjects(w http.ResponseWriter, r *http.Request, bkt string) *ossError {
	q := r.URL.Query()
	maxKeys := 100
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return ossErr(400, "InvalidArgument", "max-keys should be an integer between 1 and 1000.")
		}
		maxKeys = n
	}
	v2 := q.Get("list-type") == "2"
	after := q.Get("marker")
	if v2 {
		after = firstOf(q.Get("continuation-token"), q.Get("start-after"))
	}
	s.mu.Lock()
	var keys []string
	for k := range s.buckets[bkt].objects {
		if strings.HasPrefix(k, q.Get("prefix")) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	truncated := len(keys) > maxKeys
	keys = keys[:min(len(keys), maxKeys)]
	entries := []listEntry{}
	for _, k := range keys {
		o := s.buckets[bkt].objects[k]
		entries = append(entries, listEntry{Key: encodeKey(r, k), LastModified: o.modified.UTC().Format("2006-01-02T15:04:05.000Z"),
			ETag: o.etag, Type: "Normal", Size: o.size, StorageClass: "Standard"})
	}
	s.mu.Unlock()
	next := ""
	if truncated {
		next = keys[len(keys)-1]
	}
	res := struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		Name                  string
		Prefix                string
		Marker                *string `xml:",omitempty"`
		StartAfter            *string `xml:",omitempty"`
		ContinuationToken     *string `xml:",omitempty"`
		MaxKeys               int
		Delimiter             string
		IsTruncated           bool
		NextMarker            *string `xml:",omitempty"`
		NextContinuationToken *string `xml:",omitempty"`
		KeyCount              *int    `xml:",omitempty"`
		EncodingType          string  `xml:",omitempty"`
		Contents              []listEntry
	}{Name: bkt, Prefix: encodeKey(r, q.Get("prefix")), MaxKeys: maxKeys, IsTruncated: truncated,
		EncodingType: encodingType(r), Contents: entries}
	if v2 {
		n := len(entries)
		res.KeyCount = &n
		if truncated {
			res.NextContinuationToken = &next
		}
		if t := q.Get("continuation-token"); t != "" {
			res.ContinuationToken = &t
		}
	} else {
		m := encodeKey(r, q.Get("marker"))
		res.Marker = &m
		if truncated {
			nm := encodeKey(r, next)
			res.NextMarker = &nm
		}
	}
	return writeXML(w, res)
}
