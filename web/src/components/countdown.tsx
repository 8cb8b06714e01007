import { useEffect, useState } from "react";
import { useServerOffset } from "../sse/provider.js";

/** `m:ss` of a non-negative number of milliseconds (rounded up to the second). */
export function minutesSeconds(ms: number): string {
  const total = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, "0")}`;
}

/**
 * Time left until the ISO time `iso` on the server's clock (offset from `system.clock.sync`),
 * ticking every second: "expires in 4:59", then "expired". The absolute time is in `title`.
 */
export function Countdown({ iso, label = "expires in" }: { iso: string; label?: string }) {
  const offset = useServerOffset();
  const [now, setNow] = useState(() => Date.now());
  const at = Date.parse(iso);
  const left = at - (now + offset);
  const done = left <= 0;
  useEffect(() => {
    if (done) return;
    const t = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(t);
  }, [done]);
  return (
    <time className={left <= 0 ? "countdown expired" : "countdown"} dateTime={iso} title={new Date(at).toLocaleString()}>
      {left <= 0 ? "expired" : `${label} ${minutesSeconds(left)}`}
    </time>
  );
}
