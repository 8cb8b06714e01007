import { Placeholder } from "../components/placeholder.js";

/** Backups: list, create, download, import, restore, delete (issue 12 "Backups"). Placeholder until built. */
export function BackupsPage() {
  return <Placeholder title="Backups" />;
}
