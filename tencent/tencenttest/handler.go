package tencenttest

import "net/http"

// ServeHTTP answers r as the server answers on its own port, so that a
// program can also serve the fake on a listener of its own, such as a
// fixed port (termsig fake tencent does). Those requests are counted,
// faulted and released by Close as the others are; Stop and Start concern
// only the server's own listener, and the connections of another listener
// are its server's to close. Faults that drop the connection hang up
// through w, which must then be an [http.Hijacker], as net/http's HTTP/1
// server gives.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handle(w, r) }
