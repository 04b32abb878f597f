// The documents of the ScratchRun HTTP API as they travel (snake_case), by
// hand from docs/api.md and the issue-27 wire contract until the OpenAPI
// document exists to generate them from (npm run gen writes src/openapi.ts).

/** The body of POST /v1/exec. */
export interface WireRequest {
  runtime: string;
  code: string;
  limits?: { timeout_ms?: number; memory_mb?: number };
  env?: Record<string, string>;
  files?: Record<string, string>;
  files_base64?: Record<string, string>;
  return_files?: string[];
  network?: "none" | "egress";
}

/** One output stream cut at its cap. */
export interface WireOutputCut {
  stream: string;
  limit_bytes: number;
  dropped_bytes: number;
}

/** What a result's note says, as data. */
export interface WireFacts {
  timeout_ms: number;
  memory_mb: number;
  timed_out: boolean;
  memory_limit_hit: boolean;
  machine_memory_hit?: boolean;
  process_limit: number;
  process_limit_hit: boolean;
  fork_failures: number;
  output_cut: WireOutputCut[] | null;
  files_not_returned: string[] | null;
  sandbox_notes: string[] | null;
  unenforced_limits: string[] | null;
  no_space?: { tmp_mb: number; writable_mb: number };
  alias?: { requested: string; runtime: string; version?: string };
}

/** The 200 body of POST /v1/exec (and the data of the stream's result event). */
export interface WireResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  execution_ms: number;
  state_purged: boolean;
  files: Record<string, string> | null;
  note: string;
  outcome: string;
  facts: WireFacts;
}

/** The API's error document. */
export interface WireError {
  error: {
    code: string;
    message: string;
    reason?: string;
    field?: string;
    limit?: number;
  };
}

/** One installed runtime of GET /v1/runtimes. */
export interface WireRuntime {
  name: string;
  version: string;
  image: string;
  libraries: string[] | null;
}

/** The 200 body of GET /v1/runtimes. */
export interface WireInfo {
  version?: string;
  worker_versions?: string[];
  runtimes: WireRuntime[] | null;
  isolation: string;
  network_default: string;
  egress_allowed: boolean;
  default_timeout_ms: number;
  min_timeout_ms: number;
  max_timeout_ms: number;
  default_memory_mb: number;
  min_memory_mb: number;
  max_memory_mb: number;
  output_limit_bytes: number;
  max_return_bytes: number;
  unenforced_limits: string[] | null;
  admission?: Record<string, unknown>;
  software_emulation?: boolean;
}
