import { useEffect, useState } from "react";
import { useServerOffset } from "../sse/provider.js";

const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ["year", 365 * 24 * 3600_000],
  ["month", 30 * 24 * 3600_000],
  ["day", 24 * 3600_000],
  ["hour", 3600_000],
  ["minute", 60_000],
  ["second", 1_000],
];
const format = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** "3 minutes ago" for `deltaMs` (negative: past), in the largest whole unit. */
export function relativeText(deltaMs: number): string {
  const abs = Math.abs(deltaMs);
  if (abs < 10_000) return "just now";
  for (const [unit, ms] of UNITS) {
    if (abs >= ms) return format.format(Math.round(deltaMs / ms), unit);
  }
  return "just now";
}

/**
 * An ISO time as relative text ("5 minutes ago"), measured against the server's clock (offset from
 * `system.clock.sync`), refreshed at each clock sync and every 15 s; the absolute time is in `title` and `dateTime`.
 * `null` renders `empty`.
 */
export function RelativeTime({ iso, empty = "never" }: { iso: string | null; empty?: string }) {
  const offset = useServerOffset();
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 15_000);
    return () => clearInterval(t);
  }, []);
  if (iso === null) return <span className="muted">{empty}</span>;
  const at = Date.parse(iso);
  return (
    <time dateTime={iso} title={new Date(at).toLocaleString()}>
      {relativeText(at - (now + offset))}
    </time>
  );
}
