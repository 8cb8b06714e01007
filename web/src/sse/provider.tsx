import { useQueryClient, type QueryKey } from "@tanstack/react-query";
import { createContext, useContext, useEffect, useRef, useState, useSyncExternalStore, type ReactNode } from "react";
import { useAuth } from "../api/auth.js";
import { sessionEnded } from "../api/client.js";
import type { SseEventType, SseWirePayloads } from "../api/types.js";
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

/**
 * Puts each `type` payload (or `select(payload)`) into the query cache under `key`: for events
 * whose payload IS the projection a query holds (`system.status.updated` → system status,
 * `settings.mqtt.updated` → `payload.mqtt`). `select` may return undefined to skip a frame
 * (e.g. one for another config).
 */
export function useSsePatch<T extends SseEventType, D>(type: T, key: QueryKey, select: (payload: SseWirePayloads[T]) => D | undefined): void {
  const queryClient = useQueryClient();
  useSseEvent(type, (payload) => {
    const data = select(payload);
    if (data !== undefined) queryClient.setQueryData(key, data);
  });
}

/**
 * Invalidates the query `key(payload)` names for each `type` frame (refetched at once if on
 * screen, else when next shown; spec §6.5 rule 7). Return undefined to ignore a frame that
 * does not concern this page, e.g. `(p) => p.config_id === configId ? queryKeys.config(configId) : undefined`.
 */
export function useSseInvalidate<T extends SseEventType>(type: T, key: (payload: SseWirePayloads[T]) => QueryKey | undefined): void {
  const queryClient = useQueryClient();
  useSseEvent(type, (payload) => {
    const k = key(payload);
    if (k !== undefined) void queryClient.invalidateQueries({ queryKey: k });
  });
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
