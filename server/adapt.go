package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// netHTTPHandler serves h to net/http: each request is copied into a
// fasthttp request (its body read up to MaxBodyBytes, 413 beyond), served
// by h, and the response copied back. It costs a copy of each request and
// response, which only Handler's users and h2c connections pay.
func (s *Server) netHTTPHandler(h fasthttp.RequestHandler) http.Handler {
	log := fasthttpLogger{s.log}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		req.Header.SetMethod(r.Method)
		req.SetRequestURI(r.URL.RequestURI())
		req.Header.SetHost(r.Host)
		for k, vs := range r.Header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodyBytes+1))
			if err != nil {
				writeError(w, http.StatusBadRequest, errBadRequest, "reading the body: "+err.Error())
				return
			}
			if int64(len(body)) > s.cfg.MaxBodyBytes {
				writeError(w, http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("body exceeds %d bytes", s.cfg.MaxBodyBytes))
				return
			}
			req.SetBodyRaw(body)
		}
		var addr net.Addr
		if a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
			addr = a
		}
		var c fasthttp.RequestCtx
		c.Init(req, addr, log)
		h(&c)
		hdr := w.Header()
		for k, v := range c.Response.Header.All() {
			if string(k) != fasthttp.HeaderContentLength {
				hdr.Add(string(k), string(v))
			}
		}
		body := c.Response.Body()
		hdr.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(c.Response.StatusCode())
		w.Write(body)
	})
}
