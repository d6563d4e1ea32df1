import type { ReactNode } from "react";
import { ConsoleFrame } from "@/components/console-frame";
import { currentPageUser } from "@/server/http/page";

export default async function ConsoleLayout({ children }: { children: ReactNode }) {
  // Without a session this sends the visitor to sign-in, and back here after.
  const user = await currentPageUser();
  return <ConsoleFrame user={user}>{children}</ConsoleFrame>;
}
