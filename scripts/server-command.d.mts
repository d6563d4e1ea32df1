/** See server-command.mjs. */
export function serverBundle(root: string): string;
export function serverCommand(root: string, nodeArgs?: string[]): { command: string; args: string[] };
