// A reader of text/event-stream (the HTML standard's event stream format)
// from a fetch body: the API streams a run as SSE events, and browsers'
// EventSource cannot POST, so the client parses the body itself.

/** One dispatched event: its id, name and data (data lines joined by "\n"). */
export interface SSEMessage {
  id: string;
  event: string;
  data: string;
}

/**
 * Yields the events of body as they complete. Comments (": keep-alive")
 * and fields other than id, event and data are skipped; an event cut off
 * by the end of the body is not dispatched, as the format says.
 */
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let id = "";
  let event = "";
  let data: string[] = [];
  // A "\r" at the end of one chunk may be the first half of "\r\n".
  let skipLF = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        if (skipLF && buffer.length > 0) {
          if (buffer[0] === "\n") buffer = buffer.slice(1);
          skipLF = false;
        }
        const end = buffer.search(/[\r\n]/);
        if (end < 0) break;
        const line = buffer.slice(0, end);
        if (buffer[end] === "\r") {
          if (end + 1 < buffer.length) {
            buffer = buffer.slice(end + (buffer[end + 1] === "\n" ? 2 : 1));
          } else {
            buffer = "";
            skipLF = true;
          }
        } else {
          buffer = buffer.slice(end + 1);
        }
        if (line === "") {
          if (data.length > 0 || event !== "") {
            yield { id, event: event || "message", data: data.join("\n") };
          }
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (name === "data") data.push(value);
        else if (name === "event") event = value;
        else if (name === "id" && !value.includes("\0")) id = value;
      }
      if (done) return;
    }
  } finally {
    // A consumer that stops early closes the connection (for a run without
    // an Idempotency-Key, that kills its sandbox, as it should).
    await reader.cancel().catch(() => {});
  }
}
