package execapi

// Request is one call: run Code with Runtime in a fresh sandbox and report back.
type Request struct {
	// Runtime names a catalog entry such as "python3.13", "node20" or "bash".
	Runtime string `json:"runtime"`
	// Code is the program text, written to the runtime's file inside the sandbox.
	Code string `json:"code"`
	// Limits bound the run; zero values take the operator's defaults.
	Limits Limits `json:"limits"`
	// Env is added to the sandbox's environment (secrets belong here, not in Code).
	Env map[string]string `json:"env,omitempty"`
	// Files maps absolute sandbox paths to text content written before the run.
	Files map[string]string `json:"files,omitempty"`
	// FilesBase64 is like Files for binary content, base64-encoded (standard
	// alphabet). It is an extension of the hosted contract; a path may appear in
	// only one of the two maps.
	FilesBase64 map[string]string `json:"files_base64,omitempty"`
	// ReturnFiles lists absolute sandbox paths read after the run and returned.
	ReturnFiles []string `json:"return_files,omitempty"`
	// Network is "none" (only loopback) or "egress" (the public internet, never
	// private networks or the host); empty means the operator's default.
	Network string `json:"network,omitempty"`
}

// Network modes of a Request.
const (
	NetworkNone   = "none"
	NetworkEgress = "egress"
)

// Limits bound one run. A zero field means "the operator's default".
type Limits struct {
	// TimeoutMS is the wall-clock limit; when it passes, everything in the
	// sandbox is killed and the exit code is 124.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MemoryMB caps memory (swap included) for all processes of the run together.
	MemoryMB int `json:"memory_mb,omitempty"`
}
