module github.com/scratchrun/scratchrun

go 1.26.8

require (
	github.com/elastic/go-seccomp-bpf v1.6.0 // indirect
	github.com/moby/profiles/seccomp v0.3.0 // indirect
	github.com/opencontainers/runtime-spec v1.2.1 // indirect
	golang.org/x/net v0.41.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
