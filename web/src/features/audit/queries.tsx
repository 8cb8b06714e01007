/** The audit log's pages and its verification (README "Audit log"). */
import { useInfiniteQuery, useMutation } from "@tanstack/react-query";
import { api, tokenStore } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** Entries per page of the Audit page. */
const AUDIT_PAGE = 100;

/** The filters of the list and the export, as the URL holds them (empty: not set). */
export interface AuditFilters {
  actor: string;
  action: string;
  target_id: string;
  outcome: string;
  since: string;
  until: string;
}

/** The filters the API takes: empty ones left out, dates (yyyy-mm-dd, UTC) as ISO times. */
export function auditQuery(f: AuditFilters): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of ["actor", "action", "target_id", "outcome"] as const) if (f[key].trim() !== "") out[key] = f[key].trim();
  if (f.since !== "") out["since"] = `${f.since}T00:00:00.000Z`;
  // "until" is a day: entries of that whole day are included.
  if (f.until !== "") out["until"] = new Date(Date.parse(`${f.until}T00:00:00.000Z`) + 86_400_000).toISOString();
  return out;
}

/** `GET /api/v1/audit`: pages newest first; every `audit.appended` reads them again (sse/cache-effects.ts). */
export function useAuditEntries(filters: AuditFilters) {
  const query = auditQuery(filters);
  return useInfiniteQuery({
    queryKey: keys.auditPages(query),
    queryFn: ({ signal, pageParam }) => api.listAuditEntries({ query: { ...query, limit: AUDIT_PAGE, ...(pageParam === null ? {} : { cursor: pageParam }) }, signal }),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_cursor,
  });
}

/** `GET /api/v1/audit/verify`, on demand. */
export function useVerifyAudit() {
  return useMutation({ mutationFn: () => api.verifyAuditLog() });
}

/**
 * Downloads `GET /api/v1/audit/export` (NDJSON) with the session's bearer token: fetched as a
 * file, then saved through a temporary link (a plain link could not carry the token).
 * @throws Error with the server's message when the export is refused
 */
export async function downloadAuditExport(filters: AuditFilters): Promise<void> {
  const qs = new URLSearchParams(auditQuery(filters)).toString();
  const token = tokenStore.get();
  const res = await fetch(`/api/v1/audit/export${qs === "" ? "" : `?${qs}`}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  if (!res.ok) {
    const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
    throw new Error(body?.error?.message ?? `The export failed (${res.status}).`);
  }
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = "audit.ndjson";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
