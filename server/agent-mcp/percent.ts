import "server-only";

/**
 * Percent-encoding as a hostile agent may stack it. A server, or a library under it, may decode
 * a URI more than once (a `file:` server decodes the URI, then a path helper decodes again), so
 * `%252e%252e%252f` is `../` to it though no single decoding shows a dot segment. A URI's checks
 * for `.`/`..` segments look at every decoding of it, down to the one that decodes to itself.
 */

/** Decodings looked through; a URI still changing after this many is taken as hostile. */
export const MAX_PERCENT_DECODINGS = 8;

/** `text` with each `%XX` triplet turned into the character of that code, byte by byte (never throws). */
function decodeOnce(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/**
 * `uri`, then each decoding of the one before, until one decodes to itself (that one is the
 * last); `null` when that takes more than {@link MAX_PERCENT_DECODINGS} decodings. A decoding
 * is byte by byte, so a triplet that is no UTF-8 still decodes, and `.`, `/`, `\` and NUL come
 * out as themselves.
 */
export function percentDecodings(uri: string): string[] | null {
  const layers = [uri];
  for (let i = 0; i < MAX_PERCENT_DECODINGS; i++) {
    const last = layers[layers.length - 1] ?? uri;
    const next = decodeOnce(last);
    if (next === last) return layers;
    layers.push(next);
  }
  return null;
}
