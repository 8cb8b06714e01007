import { Link } from "react-router";
import { usePageTitle } from "../page-title.js";

/** Any path the router does not know. */
export function NotFoundPage() {
  usePageTitle("Page not found");
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Page not found</h1>
      <Link to="/">Home</Link>
    </section>
  );
}
