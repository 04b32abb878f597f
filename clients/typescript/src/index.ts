// The ScratchRun client for Node 20+ and browsers. Saving returned files
// to disk is Node's alone: "scratchrun/node".

export { ScratchRun, DEFAULT_URL } from "./client.js";
export type { ClientOptions, CallOptions, RetryInfo, StreamEvent } from "./client.js";
export type { RunRequest, Result, ServerInfo, RuntimeInfo, LimitRange } from "./types.js";
export type { SessionRequest, SessionRunRequest, SessionInfo, SessionEnd, SessionCallInfo, SessionResult, SessionsInfo } from "./sessions.js";
export type { WireFacts, WireOutputCut, WireAdmission, ErrorCode, RefusalReason, Outcome, SessionEndReason } from "./wire.js";
export {
  ScratchRunError,
  BadRequestError,
  UnauthorizedError,
  RefusedError,
  WorkerLostError,
  IdempotencyConflictError,
  ConnectionError,
  SessionNotFoundError,
  SessionEndedError,
  SessionLostError,
  SessionLimitError,
  SessionFileNotFoundError,
  FileTooLargeError,
  ForkUnsupportedError,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
