// The ScratchRun client for Node 20+ and browsers. Saving returned files
// to disk is Node's alone: "scratchrun/node".

export { ScratchRun, DEFAULT_URL } from "./client.js";
export type { ClientOptions, CallOptions, RetryInfo, StreamEvent } from "./client.js";
export type { RunRequest, Result, ServerInfo, RuntimeInfo, LimitRange } from "./types.js";
export type { WireFacts, WireOutputCut, WireAdmission, ErrorCode, RefusalReason, Outcome } from "./wire.js";
export {
  ScratchRunError,
  BadRequestError,
  UnauthorizedError,
  RefusedError,
  WorkerLostError,
  IdempotencyConflictError,
  ConnectionError,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
