/**
 * Asking the hosts for their peers from the mesh page: the "Check links" button (operators and
 * above) and, while the topology is on screen in a visible tab, a refresh every
 * {@link LINK_REFRESH_INTERVAL_MS}. The backend asks hosts only on such a request (no traffic
 * without viewers, spec §6.4 rule 8's spirit), so a closed or hidden page costs the hosts nothing.
 */
import { useEffect, useRef } from "react";
import { useCan, useGate } from "../../api/roles.js";
import type { LinkRefreshAnswer } from "../../api/types.js";
import { useRefreshLinks } from "./mutations.js";

/** How often the open topology asks for fresh reports, ms: under WireGuard's 2-minute rekey, so a dead link shows within one cycle of turning stale. */
export const LINK_REFRESH_INTERVAL_MS = 60_000;

/** "3 of 4 hosts reported; 1 timed out: n4." (or that no host was online to ask). */
export function refreshSentence(answer: LinkRefreshAnswer, names: ReadonlyMap<string, string>): string {
  if (answer.asked.length === 0) return "No host is online to ask; the links show the last reports.";
  const late = answer.timed_out.map((id) => names.get(id) ?? id);
  const head = `${answer.reported.length} of ${answer.asked.length} ${answer.asked.length === 1 ? "host" : "hosts"} reported`;
  return late.length === 0 ? `${head}.` : `${head}; ${late.length} timed out: ${late.join(", ")}.`;
}

/** The "Check links" button and what the last check found. */
export function CheckLinks({ configId, names }: { configId: string; names: ReadonlyMap<string, string> }) {
  const gate = useGate("refreshConfigLinks");
  const refresh = useRefreshLinks(configId);
  return (
    <div className="check-links">
      <button type="button" {...gate.props} disabled={gate.disabled || refresh.isPending} onClick={() => refresh.mutate()}>
        {refresh.isPending ? "Checking links…" : "Check links"}
      </button>
      {gate.reason}
      <span role="status" className="check-links-result">
        {refresh.isSuccess && refreshSentence(refresh.data, names)}
      </span>
      {refresh.isError && <p role="alert">{refresh.error.message}</p>}
    </div>
  );
}

/** While mounted, the tab visible and the role allowed: a refresh now and every {@link LINK_REFRESH_INTERVAL_MS}; a failure waits for the next. */
export function useLinkPolling(configId: string): void {
  const allowed = useCan("refreshConfigLinks").allowed;
  const refresh = useRefreshLinks(configId);
  const mutate = useRef(refresh.mutate);
  mutate.current = refresh.mutate;
  useEffect(() => {
    if (!allowed) return;
    let timer: ReturnType<typeof setInterval> | null = null;
    const start = () => {
      if (timer !== null || document.visibilityState !== "visible") return;
      mutate.current();
      timer = setInterval(() => mutate.current(), LINK_REFRESH_INTERVAL_MS);
    };
    const stop = () => {
      if (timer !== null) clearInterval(timer);
      timer = null;
    };
    const onVisibility = () => (document.visibilityState === "visible" ? start() : stop());
    start();
    document.addEventListener("visibilitychange", onVisibility);
    return () => {
      stop();
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, [allowed, configId]);
}
