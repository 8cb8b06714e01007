import { Placeholder } from "../components/placeholder.js";

/** Configs list: search, create, delete (issue 12 "Configs"). Placeholder until built. */
export function ConfigsPage() {
  return <Placeholder title="Configs" />;
}
