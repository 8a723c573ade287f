package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzResponse reads arbitrary bytes as a response with this package and
// with net/http. Neither may panic, and where both read a whole response
// they must agree on its status and body.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nA\n0123456789\n0\n\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cn := &conn{h: &host{c: New(Options{})}, br: *bufio.NewReaderSize(bytes.NewReader(data), 64)}
		cn.body.cn = cn
		cn.resp.Body = &cn.body
		_, err := cn.readHead()
		var ours []byte
		if err == nil {
			ours, err = io.ReadAll(&cn.body)
		}
		// The body read in views, as the SSE reader reads it: the same
		// bytes, and an error where Read found one.
		vn := &conn{h: &host{c: New(Options{})}, br: *bufio.NewReaderSize(bytes.NewReader(data), 64)}
		vn.body.cn = vn
		vn.resp.Body = &vn.body
		if _, verr := vn.readHead(); verr == nil {
			viewed, verr := readViews(&vn.body, 1+len(data)%5)
			if (verr == nil) != (err == nil) || !bytes.Equal(viewed, ours) {
				t.Fatalf("read: %q, %v; in views: %q, %v", ours, err, viewed, verr)
			}
		}
		theirs, err2 := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), &http.Request{Method: http.MethodPost})
		if err != nil || err2 != nil || theirs.StatusCode < 200 {
			return
		}
		body, err2 := io.ReadAll(theirs.Body)
		if err2 != nil {
			return
		}
		if cn.resp.StatusCode != theirs.StatusCode || !bytes.Equal(ours, body) {
			t.Fatalf("status %d body %q; net/http: status %d body %q", cn.resp.StatusCode, ours, theirs.StatusCode, body)
		}
	})
}
