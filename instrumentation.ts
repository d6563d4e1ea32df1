/** Runs once when the Next.js server starts: boots the Gatehouse runtime (Node.js only). */
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  const { boot } = await import("./server/boot");
  await boot();
}
