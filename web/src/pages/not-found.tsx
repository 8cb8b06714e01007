import { Link } from "react-router";

/** Any path the router does not know. */
export function NotFoundPage() {
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Page not found</h1>
      <Link to="/">Home</Link>
    </section>
  );
}
