import { createContext, useContext } from "react";
import type { Viewer } from "@/lib/viewer";

/**
 * The signed-in person (see `Viewer`), for what a page's deeper parts say about their own calls;
 * null where the page did not provide one.
 */
export const ViewerContext = createContext<Viewer | null>(null);

export function useViewer(): Viewer | null {
  return useContext(ViewerContext);
}
