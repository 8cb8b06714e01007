import { useEffect, useState } from "react";

/**
 * Copies `text` to the clipboard; says "Copied" for 2 s. Its accessible name is `Copy <label>`.
 * Falls back to a hidden textarea where the Clipboard API is missing (plain-http origins).
 */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const t = setTimeout(() => setState("idle"), 2_000);
    return () => clearTimeout(t);
  }, [state]);
  const copy = async () => {
    try {
      if (navigator.clipboard !== undefined) await navigator.clipboard.writeText(text);
      else legacyCopy(text);
      setState("copied");
    } catch {
      try {
        legacyCopy(text);
        setState("copied");
      } catch {
        setState("failed");
      }
    }
  };
  return (
    <button type="button" className="copy-button" aria-label={`Copy ${label}`} onClick={() => void copy()}>
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
      <span className="visually-hidden" role="status">
        {state === "copied" ? `${label} copied` : ""}
      </span>
    </button>
  );
}

function legacyCopy(text: string): void {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("copy refused");
}
