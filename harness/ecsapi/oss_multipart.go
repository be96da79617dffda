package ecsapi

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc64"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

func (s *Server) initiateUpload(w http.ResponseWriter, r *http.Request, bkt, key string) *ossError {
	id := strings.ToUpper(hex.EncodeToString([]byte(newID("", 16))))
	s.mu.Lock()
	s.uploads[id] = &upload{bucket: bkt, key: key, contentType: r.Header.Get("Content-Type"), parts: map[int]*object{}}
	s.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(s.dir, "uploads", id), 0o755); err != nil {
		return ossErr(500, "InternalError", err.Error())
	}
	return writeXML(w, struct {
		XMLName      xml.Name `xml:"InitiateMultipartUploadResult"`
		Bucket       string
		Key          string
		UploadId     string
		EncodingType string `xml:",omitempty"`
	}{Bucket: bkt, Key: encodeKey(r, key), UploadId: id, EncodingType: encodingType(r)})
}

func (s *Server) partPath(id string, n int) string {
	return filepath.Join(s.dir, "uploads", id, strconv.Itoa(n))
}

func (s *Server) uploadPart(w http.ResponseWriter, r *http.Request, id, num string) *ossError {
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > maxParts {
		return ossErr(400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive.")
	}
	s.mu.Lock()
	up := s.uploads[id]
	s.mu.Unlock()
	if up == nil {
		return errNoSuchUpload
	}
	tmp, o, e := s.receive(r)
	if e != nil {
		return e
	}
	if err := os.Rename(tmp, s.partPath(id, n)); err != nil {
		_ = os.Remove(tmp)
		return errNoSuchUpload // aborted meanwhile
	}
	s.mu.Lock()
	if s.uploads[id] == nil {
		s.mu.Unlock()
		return errNoSuchUpload
	}
	up.parts[n] = o
	s.mu.Unlock()
	w.Header().Set("ETag", o.etag)
	w.Header().Set("x-oss-hash-crc64ecma", strconv.FormatUint(o.crc, 10))
	w.WriteHeader(http.StatusOK)
	return nil
}

// listParts answers ListParts (OSS API reference, ListParts): the parts
// uploaded so far in part-number order, after part-number-marker, at most
// max-parts (default 1000, at most 1000) a page. A resumed upload (the OSS
// SDK's uploader with a checkpoint) reads them to skip what is there.
func (s *Server) listParts(w http.ResponseWriter, r *http.Request, bkt, key, id string) *ossError {
	q := r.URL.Query()
	limit := 1000
	if v := q.Get("max-parts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return ossErr(400, "InvalidArgument", "max-parts must be an integer between 1 and 1000.")
		}
		limit = n
	}
	marker, _ := strconv.Atoi(q.Get("part-number-marker"))
	s.mu.Lock()
	up := s.uploads[id]
	var nums []int
	parts := map[int]object{}
	if up != nil {
		for n, o := range up.parts {
			if n > marker {
				nums = append(nums, n)
				parts[n] = *o
			}
		}
	}
	s.mu.Unlock()
	if up == nil || up.bucket != bkt || up.key != key {
		return errNoSuchUpload
	}
	sort.Ints(nums)
	type part struct {
		PartNumber    int
		LastModified  string
		ETag          string
		HashCrc64ecma uint64
		Size          int64
	}
	res := struct {
		XMLName              xml.Name `xml:"ListPartsResult"`
		Bucket               string
		Key                  string
		UploadId             string
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		EncodingType         string `xml:",omitempty"`
		Part                 []part
	}{Bucket: bkt, Key: encodeKey(r, key), UploadId: id, PartNumberMarker: marker, MaxParts: limit, EncodingType: encodingType(r)}
	for i, n := range nums {
		if i == limit {
			res.IsTruncated = true
			break
		}
		o := parts[n]
		res.Part = append(res.Part, part{PartNumber: n, LastModified: o.modified.UTC().Format("2006-01-02T15:04:05.000Z"), ETag: o.etag, HashCrc64ecma: o.crc, Size: o.size})
		res.NextPartNumberMarker = n
	}
	return writeXML(w, res)
}

func (s *Server) completeUpload(w http.ResponseWriter, r *http.Request, bkt, key, id string) *ossError {
	var req struct {
		Parts []struct {
			PartNumber int
			ETag       string
		} `xml:"Part"`
	}
	s.mu.Lock()
	up := s.uploads[id]
	s.mu.Unlock()
	if up == nil || up.bucket != bkt || up.key != key {
		return errNoSuchUpload
	}
	type chosen struct {
		n int
		o *object
	}
	var parts []chosen
	if strings.EqualFold(r.Header.Get("x-oss-complete-all"), "yes") {
		s.mu.Lock()
		for n, o := range up.parts {
			parts = append(parts, chosen{n, o})
		}
		s.mu.Unlock()
		sort.Slice(parts, func(i, j int) bool { return parts[i].n < parts[j].n })
	} else {
		if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
			return ossErr(400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
		}
		s.mu.Lock()
		for i, p := range req.Parts {
			o := up.parts[p.PartNumber]
			if o == nil || !strings.EqualFold(strings.Trim(p.ETag, `"`), strings.Trim(o.etag, `"`)) {
				s.mu.Unlock()
				return ossErr(400, "InvalidPart", "One or more of the specified parts could not be found or the specified entity tag might not have matched the part's entity tag.")
			}
			if i > 0 && p.PartNumber <= req.Parts[i-1].PartNumber {
				s.mu.Unlock()
				return ossErr(400, "InvalidPartOrder", "The list of parts was not in ascending order. Parts list must specified in order by part number.")
			}
			parts = append(parts, chosen{p.PartNumber, o})
		}
		s.mu.Unlock()
	}
	if len(parts) == 0 {
		return ossErr(400, "InvalidPart", "One or more of the specified parts could not be found.")
	}
	for _, p := range parts[:len(parts)-1] {
		if p.o.size < minPartSize {
			return ossErr(400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size.")
		}
	}
	// Concatenate, re-reading the parts for the whole object's CRC-64, and
	// name it as OSS does: MD5 of the parts' MD5s, dash, part count.
	f, err := os.CreateTemp(filepath.Join(s.dir, "uploads", id), "complete-")
	if err != nil {
		return errNoSuchUpload
	}
	defer f.Close()
	crc, etags := crc64.New(crcTable), md5.New()
	var off int64
	for _, p := range parts {
		pf, err := os.Open(s.partPath(id, p.n))
		if err != nil {
			return ossErr(400, "InvalidPart", "One or more of the specified parts could not be found.")
		}
		n, err := writeSparse(f, off, pf, crc)
		pf.Close()
		if err != nil {
			return ossErr(500, "InternalError", err.Error())
		}
		off += n
		raw, _ := hex.DecodeString(strings.Trim(p.o.etag, `"`))
		etags.Write(raw)
	}
	if err := f.Truncate(off); err != nil {
		return ossErr(500, "InternalError", err.Error())
	}
	o := &object{size: off, crc: crc.Sum64(), modified: time.Now(), contentType: up.contentType,
		etag: fmt.Sprintf(`"%s-%d"`, strings.ToUpper(hex.EncodeToString(etags.Sum(nil))), len(parts))}
	if e := s.commit(bkt, key, f.Name(), o); e != nil {
		return e
	}
	s.mu.Lock()
	delete(s.uploads, id)
	s.mu.Unlock()
	_ = os.RemoveAll(filepath.Join(s.dir, "uploads", id))
	w.Header().Set("ETag", o.etag)
	w.Header().Set("x-oss-hash-crc64ecma", strconv.FormatUint(o.crc, 10))
	return writeXML(w, struct {
		XMLName      xml.Name `xml:"CompleteMultipartUploadResult"`
		EncodingType string   `xml:",omitempty"`
		Location     string
		Bucket       string
		Key          string
		ETag         string
	}{EncodingType: encodingType(r), Location: "http://" + r.Host + "/" + bkt + "/" + key,
		Bucket: bkt, Key: encodeKey(r, key), ETag: o.etag})
}

func (s *Server) abortUpload(w http.ResponseWriter, id string) *ossError {
	s.mu.Lock()
	up := s.uploads[id]
	delete(s.uploads, id)
	s.mu.Unlock()
	if up == nil {
		return errNoSuchUpload
	}
	_ = os.RemoveAll(filepath.Join(s.dir, "uploads", id))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
