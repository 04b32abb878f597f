// The documents of the ScratchRun HTTP API as they travel (snake_case):
// the schemas of the OpenAPI document a server with sessions on serves
// (internal/httpapi/openapi/openapi.json merged with sessions.json),
// generated into src/openapi.ts by `npm run gen` (test/generated.test.mjs
// fails when that file is not what the document generates).

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** The body of POST /v1/exec. */
export type WireRequest = Schemas["Request"];
/** The 200 body of POST /v1/exec (and the data of the stream's result event). */
export type WireResult = Schemas["Result"];
/** What a result's note says, as data. */
export type WireFacts = Schemas["Facts"];
/** One output stream cut at its cap. */
export type WireOutputCut = Schemas["OutputCut"];
/** The API's error document. */
export type WireError = Schemas["ErrorDocument"];
/** The 200 body of GET /v1/runtimes. */
export type WireInfo = Schemas["Info"];
/** The server's admission, in GET /v1/runtimes. */
export type WireAdmission = Schemas["AdmissionInfo"];
/** The data of a stream's started event. */
export type WireStarted = Schemas["Started"];
/** The data of a stream's stdout and stderr events. */
export type WireOutput = Schemas["Output"];

/** The error codes the API documents. */
export type ErrorCode = Schemas["ErrorDetail"]["code"];
/** Why a call was refused before it ran. */
export type RefusalReason = NonNullable<Schemas["ErrorDetail"]["reason"]>;
/** How a run ended. */
export type Outcome = WireResult["outcome"];

/** The body of POST /v1/sessions. */
export type WireSessionRequest = Schemas["SessionRequest"];
/** The body of POST /v1/sessions/{id}/exec: a Request whose runtime is optional. */
export type WireSessionCall = Schemas["SessionCall"];
/** An open session (POST and GET /v1/sessions, a fork's answer). */
export type WireSessionInfo = Schemas["SessionInfo"];
/** The 200 body of GET /v1/sessions. */
export type WireSessionList = Schemas["SessionList"];
/** How and when a session ended (DELETE's answer, a session_ended error's ended). */
export type WireSessionEnd = Schemas["SessionEnd"];
/** The 200 body of POST /v1/sessions/{id}/exec. */
export type WireSessionResult = Schemas["SessionResult"];
/** What a call in a session says of the session. */
export type WireSessionCallInfo = Schemas["SessionCallInfo"];
/** The 200 body of PUT /v1/sessions/{id}/files/{path}. */
export type WireSessionFileWritten = Schemas["SessionFileWritten"];
/** GET /v1/runtimes's sessions: the server's bounds of them. */
export type WireSessionsInfo = Schemas["SessionsInfo"];
/** Why a session ended. */
export type SessionEndReason = WireSessionEnd["reason"];
