import { useQueryClient } from "@tanstack/react-query";
import { createContext, useContext, useEffect, useState, useSyncExternalStore, type ReactNode } from "react";
import { useAuth } from "../api/auth.js";
import { sessionEnded } from "../api/client.js";
import { bindCacheEffects } from "./cache-effects.js";
import { SseConnection, type SseStatus } from "./connection.js";
import { LiveCache } from "./live-cache.js";

const SseContext = createContext<SseConnection | null>(null);

/**
 * Owns the one SSE connection of the tab while logged in (spec §6.5 rule 3): opened at login,
 * closed at logout, reopened with the new token. Its one subscription is the cache table
 * (`cache-effects.ts`): every frame changes the query cache as the table says, whatever page is
 * open. After a reconnect, the queries on screen are refetched (the hub replays from
 * `Last-Event-ID`, this covers a replay window that was too short).
 */
export function SseProvider({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const queryClient = useQueryClient();
  const [connection, setConnection] = useState<SseConnection | null>(null);

  useEffect(() => {
    if (token === null) return;
    const conn = new SseConnection({
      token,
      onUnauthorized: () => sessionEnded(token),
      onReconnected: () => void queryClient.invalidateQueries(),
    });
    const cache = new LiveCache(queryClient);
    const unbind = bindCacheEffects(conn, cache);
    setConnection(conn);
    conn.start();
    return () => {
      conn.stop();
      unbind();
      cache.close();
      setConnection(null);
    };
  }, [token, queryClient]);

  return <SseContext.Provider value={connection}>{children}</SseContext.Provider>;
}

/** The live/reconnecting state of the shared connection (for the indicator). */
export function useSseStatus(): SseStatus {
  const connection = useContext(SseContext);
  return useSyncExternalStore(
    (cb) => connection?.onStatus(cb) ?? (() => undefined),
    () => connection?.status ?? "closed",
  );
}

/**
 * Milliseconds to add to `Date.now()` to get the server's clock (from `system.clock.sync`, sent at
 * connect and every 15 s); the component re-renders at each sync.
 */
export function useServerOffset(): number {
  const connection = useContext(SseContext);
  return useSyncExternalStore(
    (cb) => connection?.onServerTime(cb) ?? (() => undefined),
    () => connection?.serverOffsetMs ?? 0,
  );
}

/**
 * True once the shared SSE stream has been live while the caller was mounted. A snapshot taken
 * after that point cannot miss an event published between the snapshot and the subscription
 * (the hub attaches the subscriber before the stream answers), so log rows are neither lost nor
 * doubled.
 */
export function useStreamWasLive(): boolean {
  const status = useSseStatus();
  const [wasLive, setWasLive] = useState(status === "live");
  useEffect(() => {
    if (status === "live") setWasLive(true);
  }, [status]);
  return wasLive || status === "live";
}
