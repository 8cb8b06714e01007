import { useEffect } from "react";

/** Sets the tab's title to `<title> · Mesh control` while the page is shown (one per page). */
export function usePageTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Mesh control`;
  }, [title]);
}
