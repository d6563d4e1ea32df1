/** See server-command.mjs. */
export function serverCommand(root: string, nodeArgs?: string[]): { command: string; args: string[] };
