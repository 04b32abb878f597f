module github.com/scratchrun/scratchrun

go 1.26.8

require (
	github.com/elastic/go-seccomp-bpf v1.6.0
	github.com/moby/profiles/seccomp v0.3.0
	github.com/opencontainers/runtime-spec v1.2.1
	golang.org/x/net v0.41.0
	golang.org/x/sys v0.50.0
)
