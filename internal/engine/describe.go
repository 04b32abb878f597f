package engine

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

var _ execapi.Service = (*Engine)(nil)

// Describe implements execapi.Service from the installed images and the
// operator's policy.
func (e *Engine) Describe(context.Context) (execapi.Info, error) {
	info := e.cfg.Policy.Info()
	info.Isolation = e.backend.Name()
	info.OutputLimitBytes, info.MaxReturnBytes = e.cfg.OutputLimitBytes, e.cfg.MaxReturnBytes
	info.UnenforcedLimits = []string{}
	adm := e.adm.Info()
	info.Admission = &adm
	for _, l := range e.backend.UnenforcedLimits() {
		info.UnenforcedLimits = append(info.UnenforcedLimits, string(l))
	}
	if em, ok := sandbox.BackendAs[sandbox.Emulation](e.backend); ok {
		info.SoftwareEmulation = em.SoftwareEmulation()
	}
	for _, rt := range e.store.Installed() {
		libs := rt.Libraries
		if libs == nil {
			libs = []string{}
		}
		info.Runtimes = append(info.Runtimes, execapi.RuntimeInfo{Name: rt.Name, Version: rt.Version, Image: rt.Image, Libraries: libs})
	}
	return info, nil
}
