package e2btest

import "net/http"

// envdService emulates envd for every sandbox of a Server.
type envdService struct{ srv *Server }

func newEnvdService(s *Server) *envdService { return &envdService{srv: s} }

// serve answers one envd request for a running sandbox.
func (e *envdService) serve(w http.ResponseWriter, r *http.Request, sb *Sandbox) {
	http.Error(w, "envd emulation not built yet", http.StatusNotImplemented)
}

// freeze stops a sandbox's processes while it is paused; thaw continues them; stop kills them for good.
func (e *envdService) freeze(sb *Sandbox) {}
func (e *envdService) thaw(sb *Sandbox)   {}
func (e *envdService) stop(sb *Sandbox)   {}
