import { useSseStatus } from "../sse/provider.js";

const TEXT = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…", closed: "Offline" } as const;

/** The shared SSE connection's state (spec §6.5 rule 3), announced politely when it changes. */
export function LiveIndicator() {
  const status = useSseStatus();
  return (
    <span className={`live live-${status}`} role="status" aria-live="polite" data-status={status}>
      <span className="live-dot" aria-hidden="true" />
      {TEXT[status]}
    </span>
  );
}
