// Base64 of bytes by hand: the library uses no API beyond fetch, streams,
// TextDecoder and AbortSignal (no Buffer, which browsers lack), and the
// result's files must come back as exact bytes.

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const values = new Int16Array(128).fill(-1);
for (let i = 0; i < alphabet.length; i++) values[alphabet.charCodeAt(i)] = i;

/** Encodes bytes as standard padded base64. */
export function encodeBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  let chunk = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    chunk += alphabet[(n >> 18) & 63]! + alphabet[(n >> 12) & 63]!;
    chunk += i + 1 < bytes.length ? alphabet[(n >> 6) & 63]! : "=";
    chunk += i + 2 < bytes.length ? alphabet[n & 63]! : "=";
    if (chunk.length >= 8192) {
      // Joined once at the end: repeated concatenation of one long string
      // is quadratic in some engines.
      parts.push(chunk);
      chunk = "";
    }
  }
  parts.push(chunk);
  return parts.join("");
}

/** Decodes standard base64 (padding optional); throws on any other character. */
export function decodeBase64(text: string): Uint8Array {
  const clean = text.replace(/=+$/, "");
  if (clean.length % 4 === 1) throw new Error("base64: bad length");
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let i = 0; i < clean.length; i++) {
    const c = clean.charCodeAt(i);
    const v = c < 128 ? values[c]! : -1;
    if (v < 0) throw new Error(`base64: bad character at ${i}`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, o);
}
