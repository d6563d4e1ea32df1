import "server-only";

/**
 * A JSON answer that keeps its body as text until someone reads it. A web `Response` made with
 * a body builds a `ReadableStream` at once (undici's `extractBody`), which costs more than the
 * agent's whole call answer takes to serialize; the production server's bridge
 * (node-bridge.ts) writes {@link JsonResponse.text} straight to the socket, and anything else
 * (Next, a test) reads it as from any `Response`, the stream made on first use.
 */
export class JsonResponse extends Response {
  /** The serialized body. */
  readonly jsonText: string;
  private stream: ReadableStream<Uint8Array<ArrayBuffer>> | null = null;
  private used = false;
  private readonly init: ResponseInit;

  constructor(text: string, init: ResponseInit) {
    const headers = new Headers(init.headers);
    headers.set("content-type", "application/json");
    const withType = { ...init, headers };
    super(null, withType);
    this.jsonText = text;
    this.init = withType;
  }

  override get body(): ReadableStream<Uint8Array<ArrayBuffer>> {
    this.stream ??= new Response(this.jsonText).body as ReadableStream<Uint8Array<ArrayBuffer>>;
    return this.stream;
  }

  override get bodyUsed(): boolean {
    return this.used || (this.stream?.locked ?? false);
  }

  private take(): string {
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    this.used = true;
    return this.jsonText;
  }

  override async text(): Promise<string> {
    return this.take();
  }

  override async json(): Promise<unknown> {
    return JSON.parse(this.take());
  }

  override async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = Buffer.from(this.take());
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }

  override async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return new Uint8Array(await this.arrayBuffer());
  }

  override async blob(): Promise<Blob> {
    return new Blob([this.take()], { type: "application/json" });
  }

  override clone(): Response {
    if (this.bodyUsed) throw new TypeError("Response.clone: Body has already been consumed.");
    return new JsonResponse(this.jsonText, this.init);
  }
}
