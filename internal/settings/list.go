package settings

// Groups of commands that share settings.
var (
	// engine are the commands that run a local engine.
	engine = []Command{Exec, MCP, Serve, Worker, Bench}
	// policy are engine's and a front end's, which validates requests
	// against the same limits.
	policy = []Command{Exec, MCP, Serve, Frontend, Worker, Bench}
	// servers are the engines that keep admission and a warm pool (exec
	// runs one call and has neither).
	servers = []Command{MCP, Serve, Worker, Bench}
	// httpServers answer HTTP: serve (as an engine or a front end) and
	// mcp --http.
	httpServers = []Command{MCP, MCPClient, Serve, Frontend}
	// mcpOnly are mcp's own settings, on every OS.
	mcpOnly = []Command{MCP, MCPClient}
	// cluster reach NATS.
	cluster = []Command{Frontend, Worker, Bench}
	// images are the commands that open the image store.
	images = []Command{Exec, MCP, Serve, Worker, Bench, Images}
	// all is every command.
	all = Commands
	// sessionPolicy are the commands that check a session's request
	// against the operator's bounds: the engines and a front end.
	sessionPolicy = []Command{MCP, Serve, Frontend, Worker, Bench}
)

// The settings, in the order the docs list them. A flag's name and a
// variable's are each used by one setting only (TestListIsConsistent).
var (
	// Request limits: the policy every request is held to.

	DefaultTimeout = &Setting{Name: "DEFAULT_TIMEOUT_MS", Env: "SCRATCHRUN_DEFAULT_TIMEOUT_MS", Type: Int, Default: "10000", Min: 1, Unit: "ms",
		Commands: policy, Help: "timeout of a request that names none"}
	MaxTimeout = &Setting{Name: "MAX_TIMEOUT_MS", Env: "SCRATCHRUN_MAX_TIMEOUT_MS", Type: Int, Default: "30000", Min: 1, Unit: "ms",
		Commands: policy, Help: "longest timeout a request may ask for"}
	DefaultMemory = &Setting{Name: "DEFAULT_MEMORY_MB", Env: "SCRATCHRUN_DEFAULT_MEMORY_MB", Type: Int, Default: "256", Min: 1, Unit: "MB",
		Commands: policy, Help: "memory limit (swap included) of a request that names none; at least 64"}
	MaxMemory = &Setting{Name: "MAX_MEMORY_MB", Env: "SCRATCHRUN_MAX_MEMORY_MB", Type: Int, Default: "512", Min: 1, Unit: "MB",
		Commands: policy, Help: "largest memory limit a request may ask for"}
	OutputLimit = &Setting{Name: "OUTPUT_LIMIT_BYTES", Env: "SCRATCHRUN_OUTPUT_LIMIT_BYTES", Type: Int, Default: "1048576", Min: 1, Unit: "bytes",
		Commands: engine, Help: "cap on stdout and on stderr, each"}
	MaxReturn = &Setting{Name: "MAX_RETURN_BYTES", Env: "SCRATCHRUN_MAX_RETURN_BYTES", Type: Int, Default: "10485760", Min: 1, Unit: "bytes",
		Commands: engine, Help: "cap on all return files of a run together"}
	MaxPids = &Setting{Name: "MAX_PIDS", Env: "SCRATCHRUN_MAX_PIDS", Type: Int, Default: "256", Min: 1,
		Commands: engine, Help: "processes and threads per sandbox"}
	CPUMillicores = &Setting{Name: "CPU_MILLICORES", Env: "SCRATCHRUN_CPU_MILLICORES", Type: Int, Default: "1000", Min: 1, Unit: "millicores",
		Commands: engine, Help: "CPU time per sandbox (1000: one core)"}
	TmpMB = &Setting{Name: "TMP_MB", Env: "SCRATCHRUN_TMP_MB", Type: Int, Default: "128", Min: 1, Unit: "MiB",
		Commands: engine, Help: "size of /tmp (also /code and /dev/shm)"}
	WritableMB = &Setting{Name: "WRITABLE_MB", Env: "SCRATCHRUN_WRITABLE_MB", Type: Int, Default: "128", Min: 1, Unit: "MiB",
		Commands: engine, Help: "size of the writable layer over the image (where pip install goes)"}

	// Admission: how many calls run at once, and how long the others wait.

	Capacity = &Setting{Name: "capacity", Flag: "capacity", Env: "SCRATCHRUN_MAX_CONCURRENT", Type: Int, Min: 0, DefaultText: "1024, a safety bound",
		Commands: servers, Help: "at most this many sandboxes at once, whatever the machine has room for"}
	MemoryBudget = &Setting{Name: "memory-budget", Flag: "memory-budget", Env: "SCRATCHRUN_MEMORY_BUDGET_MB", Type: Size, Unit: "MiB", Max: 1 << 50,
		DefaultText: "the machine's memory less the larger of 1 GiB and a tenth", Zero: "no budget",
		Commands: servers, Help: "memory all sandboxes may use together: the limit of their cgroup parent"}
	CallFloor = &Setting{Name: "CALL_FLOOR_MB", Env: "SCRATCHRUN_CALL_FLOOR_MB", Type: Int, Default: "32", Min: 1, Unit: "MiB",
		Commands: servers, Help: "memory reserved for a call until its sandbox is measured"}
	CPUThreshold = &Setting{Name: "cpu-threshold", Flag: "cpu-threshold", Env: "SCRATCHRUN_CPU_THRESHOLD", Type: Share, Default: "0.9", Zero: "no CPU condition",
		Commands: servers, Help: "CPU pressure (the share of time some task waits for a CPU) at which no more sandboxes start"}
	Queue = &Setting{Name: "queue", Flag: "queue", Env: "SCRATCHRUN_QUEUE", Type: Int, Default: "256", Min: 1,
		Commands: []Command{MCP, Serve, Bench}, Help: "calls that may wait for room at once"}
	QueueWait = &Setting{Name: "queue-wait", Flag: "queue-wait", Env: "SCRATCHRUN_QUEUE_WAIT", Type: Duration, Default: "2s", Zero: "no waiting",
		Commands: []Command{MCP, Serve, Frontend, Bench}, Help: "how long a call waits for room (a front end: for a worker with room) before a 429"}

	// The warm pool.

	PoolFloor = &Setting{Name: "POOL_FLOOR", Env: "SCRATCHRUN_POOL_FLOOR", Type: Int, Default: "1", Min: 0, Zero: "no pool",
		Commands: servers, Help: "warm sandboxes kept per runtime when idle (the pool grows to the recent peak of demand within the memory budgets)"}
	PoolMax = &Setting{Name: "POOL_MAX", Env: "SCRATCHRUN_POOL_MAX", Type: Int, Default: "0", Min: 0, Zero: "no bound",
		Commands: servers, Help: "warm sandboxes per runtime at most"}
	PoolMemory = &Setting{Name: "POOL_MEMORY_MB", Env: "SCRATCHRUN_POOL_MEMORY_MB", Type: Int, Default: "2048", Min: 0, Unit: "MiB",
		Commands: servers, Help: "memory all warm sandboxes may use together"}
	PoolBuilders = &Setting{Name: "POOL_BUILDERS", Env: "SCRATCHRUN_POOL_BUILDERS", Type: Int, Min: 0, DefaultText: "1",
		Commands: servers, Help: "warm sandboxes built at once (the pool's CPU budget)"}

	// Zygotes (docs/zygotes.md).

	Zygote = &Setting{Name: "zygote", Flag: "zygote", Env: "SCRATCHRUN_ZYGOTE", Type: Bool, Default: "0",
		Commands: servers, Help: "make the sandboxes of Python calls on catalog images with network none from a zygote: an interpreter started once per caller, runtime and variant (light, or heavy with the runtime's preloads imported; retired after 10 minutes idle or 1000 sandboxes, at most 8), whose forks run the calls, at about half the CPU a warm sandbox's interpreter costs (a quarter for a chart); namespaces level as root only, any failure falls back to an ordinary sandbox; off, such calls use the warm pool"}

	// Sessions: a sandbox kept across calls, for callers that ask for
	// one.

	Sessions = &Setting{Name: "sessions", Flag: "sessions", Env: "SCRATCHRUN_SESSIONS", Type: Bool, Default: "0",
		Commands: sessionPolicy, Help: "offer sessions: a sandbox a caller keeps across calls (POST /v1/sessions, the MCP session tools), whose files, processes and Python or Node variables persist until it is closed, idle too long or past its lifetime; off, every call gets a fresh sandbox and the API and MCP tools offer nothing else (these are not MCP's transport sessions)"}
	SessionsIdleTTL = &Setting{Name: "SESSIONS_IDLE_TTL", Env: "SCRATCHRUN_SESSIONS_IDLE_TTL", Type: Duration, Default: "10m", Min: 10e9,
		Commands: sessionPolicy, Help: "a session ends, purged, this long after its last call ended, unless it asked for another idle TTL (idle_ttl_ms, up to SCRATCHRUN_SESSIONS_MAX_IDLE_TTL)"}
	SessionsMaxIdleTTL = &Setting{Name: "SESSIONS_MAX_IDLE_TTL", Env: "SCRATCHRUN_SESSIONS_MAX_IDLE_TTL", Type: Duration, Default: "1h", Min: 10e9,
		Commands: sessionPolicy, Help: "the longest idle TTL a session may ask for"}
	SessionsMaxLifetime = &Setting{Name: "SESSIONS_MAX_LIFETIME", Env: "SCRATCHRUN_SESSIONS_MAX_LIFETIME", Type: Duration, Default: "1h", Min: 10e9,
		Commands: sessionPolicy, Help: "a session ends, purged, this long after it opened however busy it is; it may ask for less (max_lifetime_ms)"}
	SessionsPerKey = &Setting{Name: "SESSIONS_PER_KEY", Env: "SCRATCHRUN_SESSIONS_PER_KEY", Type: Int, Default: "4", Min: 1,
		Commands: []Command{MCP, Serve, Frontend}, Help: "sessions one API key (or token) may have open at once; one more is refused (429) until one ends"}
	SessionsMax = &Setting{Name: "SESSIONS_MAX", Env: "SCRATCHRUN_SESSIONS_MAX", Type: Int, Default: "64", Min: 1,
		Commands: servers, Help: "sessions this engine (or worker) holds open at once, of all callers: each keeps its sandbox, its memory and, with egress, a network slot"}
	SessionsMaxMemory = &Setting{Name: "SESSIONS_MAX_MEMORY_MB", Env: "SCRATCHRUN_SESSIONS_MAX_MEMORY_MB", Type: Int, Default: "1024", Min: 1, Unit: "MB",
		Commands: sessionPolicy, Help: "the largest memory limit a session may ask for, for all its processes over its whole life (a session that asks for none gets SCRATCHRUN_DEFAULT_MEMORY_MB)"}

	// Network.

	NetworkDefault = &Setting{Name: "network-default", Flag: "network-default", Env: "SCRATCHRUN_NETWORK_DEFAULT", Type: Enum, Default: "none",
		Allowed: []string{"none", "egress"}, Commands: policy, Help: "network of requests that name none (egress implies --allow-egress)"}
	AllowEgress = &Setting{Name: "allow-egress", Flag: "allow-egress", Env: "SCRATCHRUN_ALLOW_EGRESS", Type: Bool, Default: "0",
		Commands: policy, Help: "let requests ask for network egress (needs root)"}
	DNS = &Setting{Name: "DNS", Env: "SCRATCHRUN_DNS", Type: IPs, DefaultText: "the host's non-loopback resolvers",
		Commands: engine, Help: "resolvers egress sandboxes use"}
	EgressAllow = &Setting{Name: "EGRESS_ALLOW", Env: "SCRATCHRUN_EGRESS_ALLOW", Type: Prefixes,
		Commands: engine, Help: "destinations egress may reach beyond the public internet (CIDRs)"}
	EgressBlock = &Setting{Name: "EGRESS_BLOCK", Env: "SCRATCHRUN_EGRESS_BLOCK", Type: Prefixes,
		Commands: engine, Help: "destinations egress may not reach, besides private and local ranges (CIDRs)"}
	EgressSubnet = &Setting{Name: "EGRESS_SUBNET", Env: "SCRATCHRUN_EGRESS_SUBNET", Type: Prefix, Default: "10.203.0.0/16",
		Commands: engine, Help: "where egress sandboxes' addresses come from"}
	EgressMaxConnections = &Setting{Name: "EGRESS_MAX_CONNECTIONS", Env: "SCRATCHRUN_EGRESS_MAX_CONNECTIONS", Type: Int, Default: "256", Min: 1, Max: 1 << 20,
		Commands: engine, Help: "connections one egress sandbox may hold at once"}
	EgressConnectionsPerSecond = &Setting{Name: "EGRESS_CONNECTIONS_PER_SECOND", Env: "SCRATCHRUN_EGRESS_CONNECTIONS_PER_SECOND", Type: Int, Default: "100", Min: 1, Max: 1 << 20,
		Commands: engine, Help: "connections one egress sandbox may open a second (bursts of twice that)"}

	// Isolation and the backends.

	Isolation = &Setting{Name: "isolation", Flag: "isolation", Env: "SCRATCHRUN_ISOLATION", Type: Enum, Default: "namespaces",
		Allowed: []string{"namespaces", "gvisor", "microvm"}, Commands: engine,
		Help: "isolation level: Linux namespaces (shares the host kernel), gVisor's application kernel (needs root and runsc) or a virtual machine per call (needs root and QEMU)"}
	StateDir = &Setting{Name: "STATE_DIR", Env: "SCRATCHRUN_STATE_DIR", Type: String, Meta: "DIR", DefaultText: "/run/scratchrun (an ordinary user: $XDG_RUNTIME_DIR/scratchrun)",
		Commands: engine, Help: "the backends' mount points and helper binaries (egress lock files stay in /run/scratchrun)"}
	CgroupParent = &Setting{Name: "CGROUP_PARENT", Env: "SCRATCHRUN_CGROUP_PARENT", Type: String, Meta: "NAME", DefaultText: "scratchrun",
		Commands: engine, Help: "cgroup sandboxes live under, shared by the engines of a host (gvisor and microvm add -gvisor, -microvm)"}
	AllowUnenforced = &Setting{Name: "ALLOW_UNENFORCED_LIMITS", Env: "SCRATCHRUN_ALLOW_UNENFORCED_LIMITS", Type: Bool, Default: "0",
		Commands: engine, Help: "let root run sandboxes without the memory, process or CPU limits the host cannot enforce (refused otherwise)"}
	Runsc = &Setting{Name: "RUNSC", Env: "SCRATCHRUN_RUNSC", Type: String, Meta: "FILE", DefaultText: "the pinned build in /var/cache/scratchrun/runsc",
		Commands: engine, Help: "runsc binary of --isolation gvisor"}
	GVisorPlatform = &Setting{Name: "GVISOR_PLATFORM", Env: "SCRATCHRUN_GVISOR_PLATFORM", Type: Enum, Allowed: []string{"systrap", "kvm", "ptrace"},
		DefaultText: "kvm when it works here, else systrap", Commands: engine, Help: "runsc platform of --isolation gvisor"}
	QEMU = &Setting{Name: "QEMU", Env: "SCRATCHRUN_QEMU", Type: String, Meta: "FILE", DefaultText: "qemu-system-x86_64 on PATH",
		Commands: engine, Help: "QEMU binary of --isolation microvm"}
	MicroVMKernel = &Setting{Name: "MICROVM_KERNEL", Env: "SCRATCHRUN_MICROVM_KERNEL", Type: String, Meta: "FILE", DefaultText: "/var/cache/scratchrun/microvm/kernel/current",
		Commands: engine, Help: "guest kernel of --isolation microvm"}
	MicroVMAccel = &Setting{Name: "MICROVM_ACCEL", Env: "SCRATCHRUN_MICROVM_ACCEL", Type: Enum, Allowed: []string{"kvm", "tcg"},
		DefaultText: "kvm if it boots a guest, else tcg", Commands: engine, Help: "accelerator of --isolation microvm (tcg: software emulation, slow)"}
	MicroVMSnapshots = &Setting{Name: "MICROVM_SNAPSHOTS", Env: "SCRATCHRUN_MICROVM_SNAPSHOTS", Type: Bool, Default: "1",
		Commands: engine, Help: "restore microvm guests from a saved one (0: boot every guest)"}
	DataDir = &Setting{Name: "DATA_DIR", Env: "SCRATCHRUN_DATA_DIR", Type: String, Meta: "DIR",
		DefaultText: "/var/lib/scratchrun (an ordinary user who cannot read its images: $XDG_DATA_HOME/scratchrun or ~/.local/share/scratchrun)",
		Commands:    images, Help: "images (images/), runtimes added by pull and import (runtimes.d/), aliases (aliases.json)"}
	Debug = &Setting{Name: "DEBUG", Env: "SCRATCHRUN_DEBUG", Type: Bool, Default: "0",
		Commands: all, Help: "debug logging on stderr"}

	// Serving HTTP.

	ListenAddr = &Setting{Name: "addr", Flag: "addr", Env: "SCRATCHRUN_ADDR", Type: Addr, Default: "127.0.0.1:8722",
		Commands: []Command{Serve, Frontend}, Help: "listen on this address (loopback by default: exposing the server is a choice)"}
	DB = &Setting{Name: "db", Flag: "db", Env: "SCRATCHRUN_DB", Type: String, Meta: "FILE|postgres://...",
		DefaultText: "/var/lib/scratchrun/scratchrun.db (an ordinary user: in their data directory)",
		Commands:    []Command{Serve, Frontend, Keys}, Help: "key and usage database: a SQLite file, or a postgres:// URL several servers may share"}
	AllowNoAuth = &Setting{Name: "allow-no-auth", Flag: "allow-no-auth", Type: Bool,
		Commands: []Command{Serve, Frontend}, Help: "serve without API keys on a non-loopback address (dangerous: anyone who reaches it runs code)"}
	MaxBody = &Setting{Name: "max-body", Flag: "max-body", Type: Size, Default: "10MiB", Min: 1, Max: 1 << 40,
		Commands: []Command{Serve, Frontend}, Help: "largest request body accepted"}
	MaxConns = &Setting{Name: "max-conns", Flag: "max-conns", Env: "SCRATCHRUN_MAX_CONNS", Type: Int, Min: 1, DefaultText: "half the descriptor limit, at most 4096",
		Commands: httpServers, Help: "client connections open at once; more wait until one closes"}
	MetricsAddr = &Setting{Name: "metrics-addr", Flag: "metrics-addr", Env: "SCRATCHRUN_METRICS_ADDR", Type: Addr,
		Commands: []Command{Serve, Frontend}, Help: "also serve /metrics, without keys, here (loopback unless --allow-public-metrics)"}
	AllowPublicMetrics = &Setting{Name: "allow-public-metrics", Flag: "allow-public-metrics", Type: Bool,
		Commands: []Command{Serve, Frontend}, Help: "let --metrics-addr listen beyond loopback (anyone who reaches it reads the metrics)"}
	ConsoleToken = &Setting{Name: "console-token", Flag: "console-token", Env: "SCRATCHRUN_CONSOLE_TOKEN", Type: String, Meta: "TOKEN",
		Commands: []Command{Serve, Frontend}, Help: "serve the web console at /console, signed in with this token of at least 16 characters (the variable is better: a flag shows in ps)"}
	PublicURL = &Setting{Name: "public-url", Flag: "public-url", Env: "SCRATCHRUN_PUBLIC_URL", Type: URL, Meta: "URL",
		DefaultText: "http://ADDR when --addr is loopback", Commands: []Command{Serve, Frontend},
		Help: "where clients reach this server (https://host[:port], the origin a TLS proxy in front serves): OAuth's resource is its /mcp, and the built-in authorization server's issuer is it"}

	// OAuth for /mcp.

	OAuthMode = &Setting{Name: "oauth", Flag: "oauth", Env: "SCRATCHRUN_OAUTH", Type: Enum, Default: "off", Allowed: []string{"off", "builtin", "external"},
		Commands: []Command{Serve, Frontend}, Help: "let /mcp take OAuth access tokens besides API keys: from the built-in authorization server (a consent page where a person pastes an API key), or from an external one (--oauth-issuer)"}
	OAuthScope = &Setting{Name: "oauth-scope", Flag: "oauth-scope", Env: "SCRATCHRUN_OAUTH_SCOPE", Type: String, Meta: "SCOPE", Default: "scratchrun",
		Commands: []Command{Serve, Frontend}, Help: "the scope a token must carry, named in every 401"}
	OAuthIssuer = &Setting{Name: "oauth-issuer", Flag: "oauth-issuer", Env: "SCRATCHRUN_OAUTH_ISSUER", Type: URL, Meta: "URL",
		Commands: []Command{Serve, Frontend}, Help: "--oauth external: the authorization server's issuer (its metadata found by RFC 8414 or OpenID discovery)"}
	OAuthKeys = &Setting{Name: "oauth-keys", Flag: "oauth-keys", Env: "SCRATCHRUN_OAUTH_KEYS", Type: String, Meta: "RULES",
		Commands: []Command{Serve, Frontend}, Help: "--oauth external: which key a token acts as, first match wins: sub:SUBJECT=KEY,client:CLIENT_ID=KEY (KEY a key's name or ID; * matches any)"}
	OAuthClientID = &Setting{Name: "OAUTH_CLIENT_ID", Env: "SCRATCHRUN_OAUTH_CLIENT_ID", Type: String, Meta: "ID",
		Commands: []Command{Serve, Frontend}, Help: "--oauth external: check tokens by introspection (RFC 7662) as this client, instead of as JWTs against the issuer's keys"}
	OAuthClientSecret = &Setting{Name: "OAUTH_CLIENT_SECRET", Env: "SCRATCHRUN_OAUTH_CLIENT_SECRET", Type: String, Meta: "SECRET",
		Commands: []Command{Serve, Frontend}, Help: "the secret of SCRATCHRUN_OAUTH_CLIENT_ID (never a flag: a flag shows in ps)"}
	OAuthAccessTTL = &Setting{Name: "OAUTH_ACCESS_TTL", Env: "SCRATCHRUN_OAUTH_ACCESS_TTL", Type: Duration, Default: "10m", Min: 1e9,
		Commands: []Command{Serve, Frontend}, Help: "--oauth builtin: how long an access token lasts"}
	OAuthRefreshTTL = &Setting{Name: "OAUTH_REFRESH_TTL", Env: "SCRATCHRUN_OAUTH_REFRESH_TTL", Type: Duration, Default: "720h", Min: 1e9,
		Commands: []Command{Serve, Frontend}, Help: "--oauth builtin: how long a refresh token lasts unused (each use replaces it)"}
	OAuthRegistration = &Setting{Name: "OAUTH_REGISTRATION", Env: "SCRATCHRUN_OAUTH_REGISTRATION", Type: Bool, Default: "1",
		Commands: []Command{Serve, Frontend}, Help: "--oauth builtin: let clients register themselves (RFC 7591; client ID metadata documents are always taken)"}

	MCPMaxSessions = &Setting{Name: "mcp-max-sessions", Flag: "mcp-max-sessions", Type: Int, DefaultText: "1000",
		Commands: httpServers, Help: "MCP sessions open at once; one more gets 503"}
	MCPSessionsPerKey = &Setting{Name: "mcp-sessions-per-key", Flag: "mcp-sessions-per-key", Type: Int, DefaultText: "16",
		Commands: httpServers, Help: "MCP sessions one API key (or token) may have open at once; one more gets 429"}
	MCPSessionIdle = &Setting{Name: "mcp-session-idle", Flag: "mcp-session-idle", Type: Duration, DefaultText: "10m0s",
		Commands: httpServers, Help: "close an MCP session after this long without a request"}

	// The MCP server.

	MCPHTTP = &Setting{Name: "http", Flag: "http", Type: Addr,
		Commands: mcpOnly, Help: "serve Streamable HTTP at /mcp on this address (e.g. 127.0.0.1:8765) instead of stdio"}
	MCPToken = &Setting{Name: "token", Flag: "token", Env: "SCRATCHRUN_MCP_TOKEN", Type: String, Meta: "TOKEN",
		Commands: mcpOnly, Help: "bearer token HTTP clients must send, at least 16 characters (the variable keeps it out of ps)"}
	APIKey = &Setting{Name: "API_KEY", Env: "SCRATCHRUN_API_KEY", Type: String, Meta: "KEY",
		Commands: mcpOnly, Help: "run code on a ScratchRun server with this API key instead of the local engine"}
	APIURL = &Setting{Name: "API_URL", Env: "SCRATCHRUN_API_URL", Type: URL, Default: "http://127.0.0.1:8722",
		Commands: mcpOnly, Help: "the server to run code on: with SCRATCHRUN_API_KEY, through its API; without, through its /mcp, signed in with OAuth"}
	OAuthClientMetadataURL = &Setting{Name: "OAUTH_CLIENT_METADATA_URL", Env: "SCRATCHRUN_OAUTH_CLIENT_METADATA_URL", Type: URL, Meta: "URL",
		Commands: mcpOnly, Help: "with SCRATCHRUN_API_URL and no API key: the https URL of a client ID metadata document to sign in as, where the server supports them (else the client registers itself); it must list http://127.0.0.1:PORT/callback with SCRATCHRUN_OAUTH_CALLBACK_PORT"}
	OAuthCallbackPort = &Setting{Name: "OAUTH_CALLBACK_PORT", Env: "SCRATCHRUN_OAUTH_CALLBACK_PORT", Type: Int, Min: 0, Max: 65535, Zero: "a free port per sign-in",
		Commands: mcpOnly, Help: "loopback port of the OAuth sign-in's redirect http://127.0.0.1:PORT/callback"}
	OAuthStore = &Setting{Name: "OAUTH_STORE", Env: "SCRATCHRUN_OAUTH_STORE", Type: Enum, Allowed: []string{"auto", "keychain", "file"}, Default: "auto",
		Commands: mcpOnly, Help: "where the OAuth sign-in (refresh token, client registration) is kept: the OS keychain, a file only the user can read, or auto: the keychain, else the file"}
	OAuthDir = &Setting{Name: "OAUTH_DIR", Env: "SCRATCHRUN_OAUTH_DIR", Type: String, Meta: "DIR", DefaultText: "scratchrun/oauth in the user's config directory ($XDG_CONFIG_HOME, ~/Library/Application Support, %AppData%)",
		Commands: mcpOnly, Help: "directory of the OAuth sign-in files (SCRATCHRUN_OAUTH_STORE file or auto)"}

	// The cluster.

	NATS = &Setting{Name: "nats", Flag: "nats", Env: "SCRATCHRUN_NATS", Type: List, Meta: "URL[,URL...]",
		Commands: []Command{Serve, Frontend, Worker, Bench}, Help: "the cluster's NATS servers (nats:// or tls://); serve with it is a front end, with no engine of its own"}
	NATSCA = &Setting{Name: "nats-ca", Flag: "nats-ca", Env: "SCRATCHRUN_NATS_CA", Type: String, Meta: "FILE",
		Commands: cluster, Help: "CA that verifies the NATS servers (turns TLS on)"}
	NATSCert = &Setting{Name: "nats-cert", Flag: "nats-cert", Env: "SCRATCHRUN_NATS_CERT", Type: String, Meta: "FILE",
		Commands: cluster, Help: "client certificate for NATS servers that verify clients"}
	NATSKey = &Setting{Name: "nats-key", Flag: "nats-key", Env: "SCRATCHRUN_NATS_KEY", Type: String, Meta: "FILE",
		Commands: cluster, Help: "client key of --nats-cert"}
	NATSUser = &Setting{Name: "nats-user", Flag: "nats-user", Env: "SCRATCHRUN_NATS_USER", Type: String, Meta: "NAME",
		Commands: cluster, Help: "NATS user; its password from --nats-password-file or SCRATCHRUN_NATS_PASSWORD"}
	NATSPassword = &Setting{Name: "NATS_PASSWORD", Env: "SCRATCHRUN_NATS_PASSWORD", Type: String, Meta: "PASSWORD",
		Commands: cluster, Help: "the NATS user's password (never a flag: a flag shows in ps)"}
	NATSPasswordFile = &Setting{Name: "nats-password-file", Flag: "nats-password-file", Env: "SCRATCHRUN_NATS_PASSWORD_FILE", Type: String, Meta: "FILE",
		Commands: cluster, Help: "file holding the NATS user's password"}
	NATSNKey = &Setting{Name: "nats-nkey", Flag: "nats-nkey", Env: "SCRATCHRUN_NATS_NKEY", Type: String, Meta: "FILE",
		Commands: cluster, Help: "NATS nkey seed file"}
	NATSCreds = &Setting{Name: "nats-creds", Flag: "nats-creds", Env: "SCRATCHRUN_NATS_CREDS", Type: String, Meta: "FILE",
		Commands: cluster, Help: "NATS credentials file (user JWT and seed)"}
	NATSAllowInsecure = &Setting{Name: "nats-allow-insecure", Flag: "nats-allow-insecure", Env: "SCRATCHRUN_NATS_ALLOW_INSECURE", Type: Bool, Default: "0",
		Commands: cluster, Help: "let NATS servers beyond loopback be reached without TLS or credentials (calls carry code and secrets: only on a network you trust for that)"}
	WorkerID = &Setting{Name: "id", Flag: "id", Env: "SCRATCHRUN_WORKER_ID", Type: String, Meta: "ID",
		DefaultText: "the NATS user, else the host name, with other characters made -",
		Commands:    []Command{Worker}, Help: "the worker's id in the cluster: letters, digits, - and _"}
	WorkerRuntimes = &Setting{Name: "runtimes", Flag: "runtimes", Env: "SCRATCHRUN_WORKER_RUNTIMES", Type: List, DefaultText: "every installed one",
		Commands: []Command{Worker}, Help: "offer only these runtimes (comma-separated)"}
	ImagesFrom = &Setting{Name: "images-from", Flag: "images-from", Env: "SCRATCHRUN_IMAGES_FROM", Type: List, Meta: "NAME=REF[,NAME=REF...]",
		Commands: []Command{Worker}, Help: "pull these runtimes at start, before registering: images `scratchrun images push` (or `images export`) wrote; a catalog name (trixie, python3.13) takes a catalog image pushed by this version and makes it that catalog image; one stored under its digest already is not downloaded again; a failed pull fails the start"}
	HealthAddr = &Setting{Name: "health-addr", Flag: "health-addr", Env: "SCRATCHRUN_HEALTH_ADDR", Type: Addr, Zero: "off",
		Commands: []Command{Worker}, Help: "serve /healthz and /readyz here for probes"}
)

// All is every setting, in the order the docs list them.
var All = []*Setting{
	DefaultTimeout, MaxTimeout, DefaultMemory, MaxMemory, OutputLimit, MaxReturn, MaxPids, CPUMillicores, TmpMB, WritableMB,
	Capacity, MemoryBudget, CallFloor, CPUThreshold, Queue, QueueWait,
	PoolFloor, PoolMax, PoolMemory, PoolBuilders, Zygote,
	Sessions, SessionsIdleTTL, SessionsMaxIdleTTL, SessionsMaxLifetime, SessionsPerKey, SessionsMax, SessionsMaxMemory,
	NetworkDefault, AllowEgress, DNS, EgressAllow, EgressBlock, EgressSubnet, EgressMaxConnections, EgressConnectionsPerSecond,
	Isolation, StateDir, CgroupParent, AllowUnenforced, Runsc, GVisorPlatform, QEMU, MicroVMKernel, MicroVMAccel, MicroVMSnapshots, DataDir, Debug,
	ListenAddr, DB, AllowNoAuth, MaxBody, MaxConns, MetricsAddr, AllowPublicMetrics, ConsoleToken, PublicURL,
	OAuthMode, OAuthScope, OAuthIssuer, OAuthKeys, OAuthClientID, OAuthClientSecret, OAuthAccessTTL, OAuthRefreshTTL, OAuthRegistration,
	MCPMaxSessions, MCPSessionsPerKey, MCPSessionIdle,
	MCPHTTP, MCPToken, APIKey, APIURL, OAuthClientMetadataURL, OAuthCallbackPort, OAuthStore, OAuthDir,
	NATS, NATSCA, NATSCert, NATSKey, NATSUser, NATSPassword, NATSPasswordFile, NATSNKey, NATSCreds, NATSAllowInsecure, WorkerID, WorkerRuntimes, ImagesFrom, HealthAddr,
}
