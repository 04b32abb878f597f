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
	p := e.cfg.Policy
	info := execapi.Info{
		Isolation:        e.backend.Name(),
		NetworkDefault:   p.NetworkDefault,
		EgressAllowed:    p.AllowEgress,
		DefaultTimeoutMS: int(p.DefaultTimeout.Milliseconds()),
		MinTimeoutMS:     int(p.MinTimeout.Milliseconds()),
		MaxTimeoutMS:     int(p.MaxTimeout.Milliseconds()),
		DefaultMemoryMB:  p.DefaultMemoryMB,
		MinMemoryMB:      p.MinMemoryMB,
		MaxMemoryMB:      p.MaxMemoryMB,
		OutputLimitBytes: e.cfg.OutputLimitBytes,
		MaxReturnBytes:   e.cfg.MaxReturnBytes,
		UnenforcedLimits: []string{},
	}
	adm := e.adm.Info()
	info.Admission = &adm
	for _, l := range e.backend.UnenforcedLimits() {
		info.UnenforcedLimits = append(info.UnenforcedLimits, string(l))
	}
	if em, ok := e.backend.(sandbox.Emulation); ok {
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
