/**
 * What one dial of a server says of its authorization, and what that makes of its failures.
 * A dial made with an OAuth grant's tokens, or one whose server answered 401 naming its
 * protected-resource metadata (it asks for an OAuth sign-in), fails differently from a dial with
 * a static header or none: {@link classifyFailure} is told which, so a refusal reads "sign in"
 * rather than "credentials not accepted". Challenges go to the sign-ins (`SignInSource`) as they
 * happen: a 401 naming the metadata asks for a sign-in, a 403 `insufficient_scope` for more scope.
 * Challenges of a dial a newer one replaced are ignored.
 */
import "server-only";
import type { AuthProvider, Transport } from "@modelcontextprotocol/client";
import type { ServerConfig } from "../config";
import { classifyFailure, type Failure, failureContext } from "./failures";
import type { SignInSource } from "./sign-in";
import type { LineRing } from "./stdio-transport";
import { createTransport, type ServerAgent } from "./transports";

/** What a dial's transport is made with besides its bearer source. */
export interface DialParts {
  stderr: LineRing;
  agent: ServerAgent;
  /** The transport's fatal error (an oversized frame, say). */
  onFatal(error: Error): void;
  /** Whether this dial is still the supervisor's current one. */
  current(): boolean;
}

export class DialAuth {
  /** Whether the current connection was dialled with an OAuth grant's tokens. */
  private dialledWithOAuth = false;
  /** Whether the current connection's server answered 401 naming its resource metadata. */
  private challenged = false;

  constructor(
    private readonly config: ServerConfig,
    private readonly signIn: SignInSource | undefined,
  ) {}

  /**
   * A fresh transport for a new dial, with `authProvider` (the grant's bearer source) or none;
   * from now on failures are judged as this dial's. Throws when the config cannot be dialled.
   */
  transport(authProvider: AuthProvider | null, parts: DialParts): Transport {
    this.dialledWithOAuth = authProvider !== null;
    this.challenged = false;
    const onChallenge = (
      status: 401 | 403,
      challenge: { resourceMetadataUrl: string | null; scope: string | null; error: string | null },
    ) => {
      if (!parts.current()) return;
      const { resourceMetadataUrl, scope } = challenge;
      if (status === 401 && resourceMetadataUrl !== null && !authProvider) {
        this.challenged = true;
        this.signIn?.challenged(this.config.name, { resourceMetadataUrl, scope });
      }
      if (status === 403 && challenge.error === "insufficient_scope") {
        this.signIn?.needsScope(this.config.name, { resourceMetadataUrl, scope });
      }
    };
    return createTransport(this.config, {
      stderr: parts.stderr,
      agent: parts.agent,
      onFatal: parts.onFatal,
      onChallenge,
      ...(authProvider ? { authProvider } : {}),
    });
  }

  /** The failure `err` stands for on the current dial (see {@link classifyFailure}). */
  classify(err: unknown): Failure {
    return classifyFailure(err, {
      ...failureContext(this.config),
      oauth: this.dialledWithOAuth,
      challenged: this.challenged,
    });
  }
}
