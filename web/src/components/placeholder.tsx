import type { ReactNode } from "react";
import { usePageTitle } from "../page-title.js";

/** A page not built yet (keeps its route and the navigation working until it is). */
export function Placeholder({ title, children }: { title: string; children?: ReactNode }) {
  usePageTitle(title);
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">{title}</h1>
      <p className="muted">This page is not built yet.</p>
      {children}
    </section>
  );
}
