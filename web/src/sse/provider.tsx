import { useQueryClient } from "@tanstack/react-query";
import { createContext, useContext, useEffect, useRef, useState, useSyncExternalStore, type ReactNode } from "react";
import { useAuth } from "../api/auth.js";
import { sessionEnded } from "../api/client.js";
import type { SseEventType } from "../api/types.js";
import { SseConnection, type SseListener, type SseStatus } from "./connection.js";

const SseContext = createContext<SseConnection | null>(null);

/**
 * Owns the one SSE connection of the tab while logged in (spec §6.5 rule 3): opened at login,
 * closed at logout, reopened with the new token. After a reconnect, the queries on screen are
 * refetched (the hub replays from `Last-Event-ID`, this covers a replay window that was too short).
 */
export function SseProvider({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const queryClient = useQueryClient();
  const [connection, setConnection] = useState<SseConnection | null>(null);

  useEffect(() => {
    if (token === null) return;
    const conn = new SseConnection({
      token,
      onUnauthorized: sessionEnded,
      onReconnected: () => void queryClient.invalidateQueries(),
    });
    setConnection(conn);
    conn.start();
    return () => {
      conn.stop();
      setConnection(null);
    };
  }, [token, queryClient]);

  return <SseContext.Provider value={connection}>{children}</SseContext.Provider>;
}

/**
 * Calls `handler(payload, frameId)` for every `type` frame while the component is mounted. Only
 * this listener is removed on unmount; the latest `handler` is always called (no resubscribe per
 * render). `payload` is typed by the event's zod schema (`src/protocol/sse-events.schema.ts`).
 */
export function useSseEvent<T extends SseEventType>(type: T, handler: SseListener<T>): void {
  const connection = useContext(SseContext);
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => {
    if (connection === null) return;
    return connection.subscribe(type, (payload, id) => ref.current(payload, id));
  }, [connection, type]);
}

/** The live/reconnecting state of the shared connection (for the indicator). */
export function useSseStatus(): SseStatus {
  const connection = useContext(SseContext);
  return useSyncExternalStore(
    (cb) => connection?.onStatus(cb) ?? (() => undefined),
    () => connection?.status ?? "closed",
  );
}

/** Milliseconds to add to `Date.now()` to get the server's clock (from `system.clock.sync`). */
export function useServerOffset(): number {
  return useContext(SseContext)?.serverOffsetMs ?? 0;
}
